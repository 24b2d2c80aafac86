"""The head and the paper's laws: attention, its gradients, the laws in weight space, EM, calibration, geometry,
the routing–content measures, the speed-up metric, settling steps and the shared statistics."""
