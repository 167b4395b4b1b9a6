"""Gradient-boosted trees in the XGBoost / LightGBM style, on md_hom kernels."""
