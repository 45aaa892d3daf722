import asyncio

from services.reranker.server import main

asyncio.run(main())
