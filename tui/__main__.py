"""`python -m tui [--theme NAME]`: the same as `svc tui`."""
import sys

from tui.main import main

sys.exit(main())
