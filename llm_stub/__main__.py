import sys

from llm_stub.server import main

sys.exit(main())
