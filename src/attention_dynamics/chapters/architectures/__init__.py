"""Chapter 7, content-based routing across architectures (the paper's architectures result): five parameter-matched
families in Paper I's three wind tunnels and a sticky-HMM tunnel, the routing law beyond attention, and the
LSTM's and Mamba's binding at runs four times as long."""
