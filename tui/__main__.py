"""`python -m tui [--theme NAME]`: the same as `svc tui`."""
import sys

from client.commands.tui import main

sys.exit(main())
