"""Chapter 4, two-timescale EM (PAPER.md §3, result 5): where the EM reading is exact (a Gaussian mixture), and
when the frame and the values of the recall head settle, measured several ways and by intervention."""
