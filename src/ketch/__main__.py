import sys

from ketch.frontends.cli import main

sys.exit(main())
