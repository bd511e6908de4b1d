"""Run one Harbor trial of ``ketch.harbor:Ketch`` in a local environment and print what came out.

Runs in the Python 3.12 venv holding the real ``harbor`` (``.ci/harbor-venv``), started by
``test_harbor_agent.py`` with ``src`` and ``tests`` on ``PYTHONPATH``. Harbor itself does the
work: it loads the task, builds the environment from ``harbor_local_env``, imports the agent by
its import path, installs it (the agent's rendered install template), runs it on the task's
instruction, downloads its logs and runs the task's check. The last line of stdout is a JSON
summary; Harbor's own trajectory validator judges the trajectory the run wrote.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path


async def main(spec: dict) -> dict:
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig, TrialConfig
    from harbor.trial.trial import Trial
    from harbor.utils.trajectory_validator import TrajectoryValidator

    config = TrialConfig(
        task=TaskConfig(path=Path(spec["task"])),
        trial_name="ketch-local",
        trials_dir=Path(spec["trials"]),
        agent=AgentConfig(import_path="ketch.harbor:Ketch", model_name=spec["model"], base_url=spec["base_url"],
                          kwargs=spec["agent_kwargs"], env=spec["agent_env"]),
        environment=EnvironmentConfig(import_path="harbor_local_env:LocalDirEnvironment", kwargs=spec["env_kwargs"]),
    )
    trial = await Trial.create(config)
    result = await trial.run()
    agent_dir = Path(spec["trials"]) / "ketch-local" / "agent"
    trajectory = agent_dir / "trajectory.json"
    validator = TrajectoryValidator()
    valid = validator.validate(trajectory) if trajectory.is_file() else False
    context = result.agent_result
    return {
        "rewards": result.verifier_result.rewards if result.verifier_result else None,
        "exception": None if result.exception_info is None else result.exception_info.model_dump(mode="json"),
        "agent_dir": str(agent_dir),
        "trajectory_valid": valid,
        "trajectory_errors": validator.get_errors(),
        "agent_version": result.agent_info.version if result.agent_info else None,
        "context": None if context is None else context.model_dump(mode="json"),
    }


if __name__ == "__main__":
    import os

    if os.environ.get("HARBOR_TRIAL_DEBUG"):  # where a slow trial spends its time: Harbor's log, and stacks every 12 s
        import faulthandler
        import logging

        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")
        faulthandler.dump_traceback_later(12, repeat=True)
    summary = asyncio.run(main(json.loads(sys.argv[1])))
    print(json.dumps(summary))
