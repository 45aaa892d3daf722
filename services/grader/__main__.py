import asyncio

from services.grader.server import main

asyncio.run(main())
