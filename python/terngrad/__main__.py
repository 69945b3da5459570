"""`python -m terngrad`: the package's command line (terngrad._cli; `python -m terngrad verify --help`)."""
import sys

from ._cli import main

sys.exit(main())
