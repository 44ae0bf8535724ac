"""The reals task: Numeric answers (GSM8K final answers, the bundled numeric set): real numbers, absolute loss"""
