import asyncio

from services.router.server import main

asyncio.run(main())
