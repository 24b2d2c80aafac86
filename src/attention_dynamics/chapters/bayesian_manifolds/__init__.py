"""Chapter 6, Bayesian manifolds in wind tunnels (the paper's Bayesian manifolds, Paper I's wind tunnels): transformers trained in Paper I's
bijection and HMM tunnels, measured against the exact posteriors and their reference levels, with Paper I's
geometry beside its nulls, and the long tier's stored models at Paper I's sizes."""
