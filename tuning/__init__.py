"""The auto-tuner: Optuna search over the parameters each md_hom description declares."""
