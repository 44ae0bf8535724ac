"""The sets task: Multi-answer QA (MAQA): answer sets under the Hamming distance; the F-beta action beside it."""
