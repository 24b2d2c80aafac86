"""Chapter 7, content-based routing across architectures (PAPER.md §3, result 7): five parameter-matched
families in Paper I's three wind tunnels and a sticky-HMM tunnel, the routing law beyond attention, and the
LSTM's and Mamba's binding at runs four times as long."""
