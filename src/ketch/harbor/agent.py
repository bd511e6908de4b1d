"""``Ketch``: Harbor's installed agent for ketch (``harbor run -a ketch.harbor:Ketch``).

Install renders ``install.sh.j2`` (ketch into a venv of its own under ``/installed-agent``);
configure writes the user config holding Harbor's model as the ``harbor`` connection
(``connection.py``); run starts ``ketch -p`` with the task's instruction, ``--yolo`` (the task
container is thrown away: nothing to protect it from, and nobody to ask), the time limit the
task gives its agent, and writes into Harbor's agent log folder the event stream
(``ketch.jsonl``), stderr, the exit code, ketch's session store and the run's ATIF trajectory
(``trajectory.json``, from ``ketch export --format atif``). A run a ketch limit ended (step,
token, cost, time) or the model refused is a finished run for Harbor; an error is raised as
the failure Harbor's error patterns classify.
"""

from __future__ import annotations

import json
import shlex
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, override

from harbor.agents.agent_auth_resolution import ModelConnectionSpec
from harbor.agents.capabilities import AgentCapabilities
from harbor.agents.installed.base import BaseInstalledAgent, with_prompt_template
from harbor.agents.options import Cli, InstalledAgentOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from harbor.models.model_api_format import ModelApiFormat
from pydantic import Field

import ketch
from ketch.harbor.connection import ketch_connection

INSTALL_DIR = PurePosixPath("/installed-agent/ketch")
FINISHED_CODES = (0, 3, 4, 5, 6, 7)
"""ketch -p exit codes of a run that ended on its own terms (README: Exit codes)."""
TIME_MARGIN = 0.9
"""The share of Harbor's agent timeout ketch gets, so it stops itself (and exports) before Harbor kills it."""
UV_INSTALLER = "https://astral.sh/uv/install.sh"


class KetchOptions(InstalledAgentOptions):
    """``harbor run --ak NAME=VALUE`` options of the ketch agent."""

    package: str | None = Field(default=None, description=(
        "What to install: a pip requirement, a path or a URL (default: ketch==<the version importing this agent>)."))
    constraints: str | None = Field(default=None, description="A constraints file in the environment to install with.")
    python: str = Field(default="3.12", description="The Python (version or path) of ketch's venv; uv fetches it if missing.")
    max_steps: Annotated[int | None, Cli("--max-steps")] = Field(default=None, ge=1, description="Model requests per run.")
    max_cost: Annotated[float | None, Cli("--max-cost")] = Field(default=None, gt=0, description="USD ceiling of the run.")
    time_limit_sec: float | None = Field(default=None, gt=0, description=(
        "Wall time ketch gives itself (default: 90 % of the agent timeout of the trial)."))


class Ketch(BaseInstalledAgent):
    """ketch, installed into the task environment and run headless on the task's instruction."""

    capabilities = AgentCapabilities(base_url=True, atif=True, reasoning_effort=True)
    MODEL_CONNECTION = ModelConnectionSpec(supported_api_formats=[
        ModelApiFormat.OPENAI_CHAT_COMPLETIONS, ModelApiFormat.OPENAI_RESPONSES,
        ModelApiFormat.ANTHROPIC_MESSAGES, ModelApiFormat.GOOGLE_GENERATE_CONTENT])
    options_model = KetchOptions

    @staticmethod
    @override
    def name() -> str:
        return "ketch"

    @property
    def _options(self) -> KetchOptions:
        assert isinstance(self.options, KetchOptions)
        return self.options

    @property
    def _ketch(self) -> str:
        return str(INSTALL_DIR / "venv" / "bin" / "ketch")

    @override
    def get_version_command(self) -> str | None:
        return f"{shlex.quote(self._ketch)} --version"

    @override
    def parse_version(self, stdout: str) -> str:
        return stdout.strip().removeprefix("ketch").strip()

    def install_script(self) -> str:
        """The install template rendered for this agent's options (every value shell-quoted)."""
        from jinja2 import StrictUndefined
        from jinja2.sandbox import SandboxedEnvironment

        text = resources.files("ketch.harbor").joinpath("install.sh.j2").read_text(encoding="utf-8")
        options = self._options
        package = options.package or f"ketch=={self._version or ketch.__version__}"
        return SandboxedEnvironment(undefined=StrictUndefined, autoescape=False).from_string(text).render(
            install_dir=shlex.quote(str(INSTALL_DIR)), python=shlex.quote(options.python), package=shlex.quote(package),
            constraints=shlex.quote(options.constraints) if options.constraints else "",
            uv_installer_url=shlex.quote(UV_INSTALLER))

    @override
    async def install(self, environment: BaseEnvironment) -> None:
        await self.ensure_system_dependencies(environment, ("curl",))
        await self.exec_as_root(environment, command=self.install_script())

    def connection(self) -> Any:
        """Harbor's model as ketch's ``harbor`` connection (config text and ``-m`` value)."""
        access = self.model_connection
        fmt = access.model_api_format.value if access.model_api_format is not None else None
        return ketch_connection(access.provider, access.model_id, key_env=access.api_key_destination_name,
                                base_url=access.execution_base_url, api_format=fmt)

    @property
    def _config_dir(self) -> str:
        return str(INSTALL_DIR / "config")

    @override
    async def configure(self, environment: BaseEnvironment) -> None:
        config = self.connection().config_toml
        await self.exec_as_root(environment, command=f"mkdir -p {shlex.quote(self._config_dir)}")
        if environment.default_user is not None:
            owner = shlex.quote(str(environment.default_user))
            await self.exec_as_root(environment, command=f"chown {owner} {shlex.quote(self._config_dir)}")
        await self._upload_config_text(environment, content=config, remote_path=f"{self._config_dir}/config.toml",
                                       filename="config.toml")

    def time_limit(self) -> float | None:
        """Seconds ketch gives itself: the option, else a share of the trial's agent timeout."""
        if self._options.time_limit_sec is not None:
            return self._options.time_limit_sec
        timeout = _trial_agent_timeout(self.logs_dir)
        return None if timeout is None else round(timeout * TIME_MARGIN, 1)

    def run_command(self, instruction: str) -> str:
        """The shell command of one run: ketch, then its trajectory, then the exit code Harbor sees."""
        logs = str(self.environment_logs_dir)
        q = shlex.quote
        flags = [f"-m {q(self.connection().model)}", "--yolo", "--output-format stream-json", self.build_cli_flags()]
        if (limit := self.time_limit()) is not None:
            flags.append(f"--time-limit {limit:g}")
        if self._options.reasoning_effort:
            flags.append(f"--think {q(self._options.reasoning_effort)}")
        python = q(str(INSTALL_DIR / "venv" / "bin" / "python"))
        first_session = "import json,sys; print(json.loads(open(sys.argv[1]).readline())['session_id'])"
        finished = " ".join(str(c) for c in FINISHED_CODES)
        return (
            f"mkdir -p {q(logs)}; "
            f"{q(self._ketch)} -p {q(instruction)} {' '.join(f for f in flags if f)} "
            f"> {q(logs + '/ketch.jsonl')} 2> {q(logs + '/ketch-stderr.txt')}; code=$?; "
            f"echo \"$code\" > {q(logs + '/exit-code.txt')}; "
            f"session=$({python} -c {q(first_session)} {q(logs + '/ketch.jsonl')}) && "
            f"{q(self._ketch)} export \"$session\" --format atif > {q(logs + '/trajectory.json')}; "
            f"cat {q(logs + '/ketch-stderr.txt')} >&2; "
            f"case \" {finished} \" in *\" $code \"*) exit 0;; esac; exit \"$code\""
        )

    def run_env(self) -> dict[str, str]:
        env = {k: v for k, v in dict(self.model_connection.env).items() if isinstance(v, str)}
        env.update(KETCH_CONFIG_DIR=self._config_dir, KETCH_DATA_DIR=f"{self.environment_logs_dir}/ketch-data",
                   PYDANTIC_AI_NO_BANNER="1")
        return env

    @override
    @with_prompt_template
    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        await self.exec_as_agent(environment, command=self.run_command(instruction), env=self.run_env())

    @override
    def populate_context_post_run(self, context: AgentContext) -> None:
        """Token counts, cost and the exit code from what the run left in Harbor's agent logs."""
        path = self.logs_dir / "trajectory.json"
        if not path.is_file():
            return
        final = json.loads(path.read_text(encoding="utf-8")).get("final_metrics") or {}
        context.n_input_tokens = final.get("total_prompt_tokens")
        context.n_cache_tokens = final.get("total_cached_tokens")
        context.n_output_tokens = final.get("total_completion_tokens")
        context.cost_usd = final.get("total_cost_usd")
        code = self.logs_dir / "exit-code.txt"
        if code.is_file():
            context.metadata = {**(context.metadata or {}), "ketch_exit_code": int(code.read_text().strip())}


def _trial_agent_timeout(logs_dir: Path) -> float | None:
    """The agent timeout of the trial whose agent logs are ``logs_dir``, as Harbor computes it."""
    config_path = logs_dir.parent / "config.json"
    if not config_path.is_file():
        return None
    from harbor.models.task.task import Task
    from harbor.models.trial.config import TrialConfig

    trial = TrialConfig.model_validate_json(config_path.read_text(encoding="utf-8"))
    if trial.agent.override_timeout_sec is not None:
        base = trial.agent.override_timeout_sec
    else:
        base = Task(task_dir=trial.task.get_task_id().get_local_path()).config.agent.timeout_sec
    if base is None:
        return None
    multiplier = trial.agent_timeout_multiplier if trial.agent_timeout_multiplier is not None else trial.timeout_multiplier
    limit = base * multiplier
    return min(limit, trial.agent.max_timeout_sec) if trial.agent.max_timeout_sec else limit
