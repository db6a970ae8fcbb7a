import sys

from demo.main_job import main

sys.exit(main())
