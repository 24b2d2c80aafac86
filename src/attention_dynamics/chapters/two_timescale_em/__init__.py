"""Chapter 4, two-timescale EM (the paper's two-timescale EM reading): where the EM reading is exact (a Gaussian mixture), and
when the frame and the values of the recall head settle, measured several ways and by intervention."""
