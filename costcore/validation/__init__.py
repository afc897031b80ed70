"""Predicted against published runs, and the calibration of the default utilization model.
"""
