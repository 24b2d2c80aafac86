"""Chapter 1, setup and notation (the paper's Section 2): one causal head, every tensor of the forward pass, and the
identities that tie them, checked against PyTorch's fused attention and autograd."""
