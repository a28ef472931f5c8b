import sys

from vllm_otel_startup.cli.main import main

sys.exit(main())
