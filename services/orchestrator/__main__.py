import asyncio

from services.orchestrator.server import main

asyncio.run(main())
