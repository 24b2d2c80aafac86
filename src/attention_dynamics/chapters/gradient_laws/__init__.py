"""Chapter 2, the gradient laws (the paper's boxed laws and the query/key laws): the routing law, the value law and the query/key
laws, each checked against autograd, the fused kernel and finite differences, and what they say in weight space."""
