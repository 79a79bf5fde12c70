import sys

from agent.commands.cli import main

sys.exit(main())
