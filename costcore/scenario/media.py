"""The multimodal block's rules and helpers (issue 17), defined in :mod:`costcore.scenario.schema`
next to the rest of validation and re-exported here for the pages and tests."""
from costcore.scenario.schema import (CUSTOM_ENCODER_KEYS, MEDIA_WORDS, TRAIN_PARTS, custom_encoder, media_tokens,  # noqa: F401
                                      multimodal_rules, pick_encoder, with_train_list)
