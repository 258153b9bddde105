import sys

from .cli.__main__ import main

sys.exit(main())
