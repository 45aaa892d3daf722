import asyncio

from services.retrieval.server import main

asyncio.run(main())
