"""Optimizers: SGD (momentum, nesterov, weight decay), Adam, AdamW."""
