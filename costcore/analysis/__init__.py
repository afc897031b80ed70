"""What is built on estimates: budgets and timelines, levers, sensitivity and uncertainty,
explanations.
"""
