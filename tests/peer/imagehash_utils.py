"""The helper module imagehash's test files import (``from .utils import
TestImageHash``), which its source distribution does not ship. Written here
from what those tests need: an image of the tests' data folder, and the
properties every hash function must have.

- check_hash_algorithm: a 1-degree rotation changes at most 10 bits, a
  90-degree rotation changes more than 10.
- check_hash_length: hash_size n gives n * n bits.
- check_hash_stored: the hex string gives back the same hash (distance 0).
- check_hash_size: sizes -1, 0 and 1 raise ValueError.
"""
import os
import unittest

import imagehash
from PIL import Image

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


class TestImageHash(unittest.TestCase):

    @staticmethod
    def get_data_image(fname=None):
        return Image.open(os.path.join(DATA, fname or "imagehash.png"))

    def check_hash_algorithm(self, func, image):
        first = func(image)
        turned = func(image.rotate(-1))
        self.assertLessEqual(first - turned, 10, "a 1-degree rotation: %s %s" % (first, turned))
        quarter = func(image.rotate(-90))
        self.assertNotEqual(first, quarter, "a 90-degree rotation gives the same hash %s" % first)
        self.assertGreater(first - quarter, 10, "a 90-degree rotation: %s %s" % (first, quarter))

    def check_hash_length(self, func, image, sizes=range(2, 21)):
        for n in sizes:
            self.assertEqual(func(image, hash_size=n).hash.size, n * n, "hash_size=%d" % n)

    def check_hash_stored(self, func, image, sizes=range(2, 21)):
        for n in sizes:
            h = func(image, n)
            back = imagehash.hex_to_hash(str(h))
            self.assertEqual(h, back, "hash_size=%d: %s from %s" % (n, back, h))
            self.assertEqual(h - back, 0, "hash_size=%d" % n)

    def check_hash_size(self, func, image, sizes=range(-1, 2)):
        for n in sizes:
            with self.assertRaises(ValueError, msg="hash_size=%d" % n):
                func(image, n)
