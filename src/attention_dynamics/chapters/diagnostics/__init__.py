"""Chapter 8, diagnostics (the paper's two diagnostic matrices): the compatibility and advantage matrices read along training —
the paper's two schedules, a healthy run against a broken one, chapter 6's transformer and a plain PyTorch encoder."""
