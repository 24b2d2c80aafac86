"""Chapter 9, A tunnel that needs routing: which of the book's tasks need learned routing at all (the same models with
routing removed), and the binding tunnel, where routing is necessary, on which the paper's dynamic claims are decided:
frame before precision, the geometry, the advantage-routing law's predictions and the EM-like schedule."""
