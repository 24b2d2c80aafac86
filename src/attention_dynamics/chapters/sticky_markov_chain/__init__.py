"""Chapter 5, the sticky Markov chain (the paper's named experiment): the paper's EM-like schedule against SGD, its protocol
exactly, the controls it lacks, the learning-rate surface and what its speed-up measures."""
