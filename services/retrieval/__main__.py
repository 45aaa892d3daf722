import asyncio

from services.retrieval.server import main

# Guarded: the parser processes (spawned) import this module again.
if __name__ == "__main__":
    asyncio.run(main())
