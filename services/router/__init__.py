"""Router: classifies a query, picks a strategy and extracts filters and intent."""
