"""Data for jobs, as OneFlow's `flow.data` offers it: MNIST for examples and tests, and OFRecord readers."""

from irflow.data.mnist import load_mnist
from irflow.frontend.records import (
    BlobConf,
    ImageCodec,
    OFRecordBytesDecoder,
    OFRecordRawDecoder,
    RawCodec,
    decode_ofrecord,
    image_decoder_unavailable,
    ofrecord_bytes_decoder,
    ofrecord_loader,
    ofrecord_raw_decoder,
    ofrecord_reader,
)

# OneFlow's JPEG decoders and the readers built on them: each raises a TraceError saying why irflow has none.
OFRecordImageDecoder = ofrecord_image_decoder = image_decoder_unavailable("OFRecordImageDecoder")
OFRecordImageDecoderRandomCrop = ofrecord_image_decoder_random_crop = image_decoder_unavailable(
    "OFRecordImageDecoderRandomCrop"
)
ofrecord_image_classification_reader = image_decoder_unavailable("ofrecord_image_classification_reader")

__all__ = [
    "BlobConf", "ImageCodec", "RawCodec", "decode_ofrecord", "ofrecord_loader", "OFRecordBytesDecoder", "OFRecordImageDecoder", "OFRecordImageDecoderRandomCrop", "OFRecordRawDecoder",
    "load_mnist", "ofrecord_bytes_decoder", "ofrecord_image_classification_reader", "ofrecord_image_decoder",
    "ofrecord_image_decoder_random_crop", "ofrecord_raw_decoder", "ofrecord_reader",
]  # fmt: skip
