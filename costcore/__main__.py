import sys

from costcore.cli.main import main

sys.exit(main())
