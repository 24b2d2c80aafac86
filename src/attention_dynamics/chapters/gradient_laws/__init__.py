"""Chapter 2, the gradient laws (PAPER.md §3, results 1–3): the routing law, the value law and the query/key
laws, each checked against autograd, the fused kernel and finite differences, and what they say in weight space."""
