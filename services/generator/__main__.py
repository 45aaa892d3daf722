import asyncio

from services.generator.server import main

asyncio.run(main())
