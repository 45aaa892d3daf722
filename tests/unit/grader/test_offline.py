"""The offline grader's use of the reranker's probability."""



async def test_offline_grader_trusts_the_reranker_probability_and_falls_back_to_word_coverage():
    from ragline.llm import Usage
    from ragline.v1 import common_pb2
    from services.grader.backends import OfflineGrader
    from services.grader.config import GraderSettings

    def scored(text: str, probability: float | None = None) -> common_pb2.ScoredChunk:
        c = common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=text[:8], title="", text=text))
        if probability is not None:
            c.scores.relevance_probability = probability
        return c

    grader = OfflineGrader(GraderSettings())
    query = "default maximumPoolSize of HikariCP"
    verdicts = await grader.documents(query, [
        scored("HikariCP's default maximumPoolSize is 10.", probability=0.1),  # the words are there, the reranker says no
        scored("Pools hold ten connections unless configured.", probability=0.9),
        scored("HikariCP's default maximumPoolSize is 10."),  # not reranked: word coverage decides
        scored("Cats sleep."),
    ], Usage())
    assert [v.relevant for v in verdicts] == [False, True, True, False]
