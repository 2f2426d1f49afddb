"""Why a query has the candidates it has, and how many copies of it fit:
GET /allocation_candidates/explain and /capacity (1.44), and the reason an
empty answer gives in the request log. The engine asked again, on its own
rules and data: nothing in the engine imports this package.
"""
