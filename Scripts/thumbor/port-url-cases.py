#!/usr/bin/env python3
"""Writes Fixtures/thumbor/url-cases.json: thumbor's URL-parsing, URL-signing and
URL-composing cases, every expected value computed by the real thumbor 7.8.0 /
libthumbor 2.0.2 code (never written by hand).

    .loadtest/venv/bin/python Scripts/thumbor/port-url-cases.py          # (re)write the file
    .loadtest/venv/bin/python Scripts/thumbor/port-url-cases.py --check  # exit 1 if it is stale

Needs a Python with thumbor==7.8.0 and libthumbor==2.0.2 installed (both MIT; thumbor
copyright globo.com, libthumbor copyright Bernardo Heynemann / globo.com); it refuses to run
with other versions. The case *inputs* (request paths, keys, option sets) are copied from
libthumbor 2.0.2's tests, thumbor 7.8.0's tests and docs, or are Strata's own ("strata: ...").

- "parse": thumbor registers `Url.regex()` for ImagingHandler (thumbor/app.py:34-36); tornado
  wraps a string pattern in `PathMatches`, which appends "$" and calls `.match(request.path)`
  on the raw, still percent-encoded path (tornado/routing.py PathMatches). This script builds
  a real `ThumborServiceApp`, takes the compiled regex of its ImagingHandler rule, matches
  each path with it, and normalises the groups with libthumbor's own `Url.parse_decrypted`
  (pointed at that regex), adding `unsafe` and `hash` from the same match.
- "sign": `UrlSigner(key).signature(url)` (what thumbor's ImagingHandler validates against).
- "compose": `Url.generate_options(**options)`.
"""
import contextlib
import io
import json
import logging
import os
import sys
from importlib.metadata import version
from urllib.parse import quote

from tornado.routing import PathMatches

from libthumbor import CryptoURL
from libthumbor.url import Url, unsafe_url, url_for
from libthumbor.url_signers.base64_hmac_sha1 import UrlSigner

VERSIONS = {"thumbor": "7.8.0", "libthumbor": "2.0.2"}
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "Fixtures", "thumbor", "url-cases.json")

LT = "thumbor/libthumbor 2.0.2"
TH = "thumbor/thumbor 7.8.0"


def check_versions():
    for dist, want in VERSIONS.items():
        got = version(dist)
        if got != want:
            sys.exit(f"{dist} {got} is installed; this script ports {dist} {want}")


def thumbor_route():
    """The compiled regex tornado matches for thumbor's ImagingHandler, taken from a real
    ThumborServiceApp (its handler list is the built-in handler lists + Url.regex())."""
    from thumbor.app import ThumborServiceApp
    from thumbor.config import Config
    from thumbor.context import Context, ServerParameters
    from thumbor.handlers.imaging import ImagingHandler
    from thumbor.importer import Importer

    logging.disable(logging.CRITICAL)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        cfg = Config(SECURITY_KEY="unused")
        importer = Importer(cfg)
        importer.import_modules()
        server = ServerParameters(8888, "localhost", "thumbor.conf", None, "info", None)
        app = ThumborServiceApp(Context(server, cfg, importer))
    logging.disable(logging.NOTSET)
    rules = [r for r in app.wildcard_router.rules if r.target is ImagingHandler]
    assert len(rules) == 1, rules
    regex = rules[0].matcher.regex
    assert regex.pattern == Url.regex() + "$", regex.pattern
    assert regex.pattern == PathMatches(Url.regex()).regex.pattern
    return regex


ROUTE = None


def parse(path):
    """Expected value of one request path: None when thumbor's route does not match."""
    match = ROUTE.match(path)
    if match is None:
        return None
    saved = Url.compiled_regex
    Url.compiled_regex = ROUTE  # parse_decrypted uses cls.compiled_regex when it is set
    try:
        values = Url.parse_decrypted(path)
    finally:
        Url.compiled_regex = saved
    assert values is not None and values["image"] == match.group("image")
    values["unsafe"] = match.group("unsafe") == "unsafe"
    values["hash"] = match.group("hash")
    return values


def signature(key, url):
    return UrlSigner(key).signature(url).decode("ascii")


class Cases:
    def __init__(self):
        self.parse, self.sign, self.compose = [], [], []
        self._paths, self._signs, self._composes = set(), set(), set()

    def add_parse(self, source, path):
        assert path.startswith("/"), path
        if path in self._paths:
            return
        self._paths.add(path)
        self.parse.append({"source": source, "path": path, "expected": parse(path)})

    def add_sign(self, source, key, url, literal=None):
        sig = signature(key, url)
        if literal is not None:
            assert sig == literal, (source, key, url, sig, literal)
        if (key, url) in self._signs:
            return sig
        self._signs.add((key, url))
        self.sign.append({"source": source, "key": key, "url": url, "signature": sig})
        return sig

    def add_signed_url(self, source, key, generated, literal=None):
        """A '/SIGNATURE/rest' URL made by libthumbor: a sign case (rest, key) whose
        signature must equal the one in the URL, and a parse case for the whole path."""
        if literal is not None:
            assert generated == literal, (source, generated, literal)
        _, sig, rest = generated.split("/", 2)
        assert self.add_sign(source, key, rest) == sig, (source, generated)
        self.add_parse(source, generated)

    def add_compose(self, source, options, literal=None):
        url = Url.generate_options(**options)
        if literal is not None:
            assert url == literal, (source, url, literal)
        key = json.dumps(options, sort_keys=True)
        if key in self._composes:
            return url
        self._composes.add(key)
        self.compose.append({"source": source, "options": options, "url": url})
        return url


def unsafe_path(generated, image="some/image.jpg"):
    return "/unsafe/" + "/".join(part for part in (generated, image) if part)


# --- libthumbor 2.0.2 ---------------------------------------------------------------------

REGEX_LITERAL = (  # tests/test_url.py test_can_get_regex
    "/?(?:(?:(?P<unsafe>unsafe)|(?P<hash>.+?))/)?(?:(?P<debug>debug)/)?(?:(?P<meta>meta)/)?"
    "(?:(?P<trim>trim(?::(?:top-left|bottom-right))?(?::\\d+)?)/)?"
    "(?:(?P<crop_left>\\d+)x(?P<crop_top>\\d+):(?P<crop_right>\\d+)x(?P<crop_bottom>\\d+)/)?"
    "(?:(?P<adaptive>adaptive-)?(?P<full>full-)?(?P<fit_in>fit-in)/)?(?:(?P<horizontal_flip>-)?"
    "(?P<width>(?:\\d+|orig))?x(?P<vertical_flip>-)?(?P<height>(?:\\d+|orig))?/)?"
    "(?:(?P<halign>left|right|center)/)?(?:(?P<valign>top|bottom|middle)/)?"
    "(?:(?P<smart>smart)/)?(?:filters:(?P<filters>.+?\\))/)?(?P<image>.+)"
)

COMPLETE_URL = (  # tests/test_url.py test_parsing_complete_url
    "/debug/meta/trim/300x200:400x500/adaptive-full-fit-in/-300x-400/"
    "left/top/smart/filters:brightness(100)/some/image.jpg"
)
COMPLETE_EXPECTED = {
    "trim": "trim", "full": True, "halign": "left", "fit_in": True, "vertical_flip": True,
    "image": "some/image.jpg", "crop": {"top": 200, "right": 400, "bottom": 500, "left": 300},
    "height": 400, "width": 300, "meta": True, "horizontal_flip": True,
    "filters": "brightness(100)", "valign": "top", "debug": True, "adaptive": True, "smart": True,
}

GENERATE_ALL = dict(
    debug=True, width=300, height=200, smart=True, meta=True, adaptive=True, full=True,
    fit_in=True, horizontal_flip=True, vertical_flip=True, halign="left", valign="top",
    crop_left=100, crop_top=100, crop_right=400, crop_bottom=400, filters="brightness(100)",
)
TEST_URL_GENERATE = [  # (test name, options, literal in the test)
    ("test_can_generate_url", dict(GENERATE_ALL, trim=True),
     "debug/meta/trim/100x100:400x400/adaptive-full-fit-in/-300x-200/left/top/smart/filters:brightness(100)"),
    ("test_can_generate_url_with_defaults", {}, ""),
    ("test_can_generate_url_with_fitin", dict(fit_in=True, adaptive=False, full=False), "fit-in"),
    ("test_can_generate_url_with_custom_trim", dict(GENERATE_ALL, trim="300x200"),
     "debug/meta/trim:300x200/100x100:400x400/adaptive-full-fit-in/-300x-200/left/top/smart/filters:brightness(100)"),
]

IMAGE_URL = "my.server.com/some/path/to/image.jpg"
URL_FOR = [  # tests/test_url_composer.py: (test name, url_for options); image_url added
    ("test_no_options_specified", {}),
    ("test_url_width_height_1", dict(width=300)),
    ("test_url_width_height_2", dict(height=300)),
    ("test_url_width_height_3", dict(width=200, height=300)),
    ("test_url_width_height_4", dict(width="orig")),
    ("test_url_width_height_5", dict(height="orig")),
    ("test_url_width_height_6", dict(width=100, height="orig")),
    ("test_url_width_height_7", dict(width="orig", height=100)),
    ("test_url_width_height_8", dict(width="orig", height="orig")),
    ("test_smart_url", dict(width=200, height=300, smart=True)),
    ("test_fit_in_url", dict(width=200, height=300, fit_in=True)),
    ("test_adaptive_fit_in_url", dict(width=200, height=300, adaptive_fit_in=True)),
    ("test_full_fit_in_url", dict(width=200, height=300, full_fit_in=True)),
    ("test_adaptive_full_fit_in_url", dict(width=200, height=300, adaptive_full_fit_in=True)),
    ("test_flip_1", dict(flip=True)),
    ("test_flip_2", dict(flip=True, width=200)),
    ("test_flop_1", dict(flop=True)),
    ("test_flop_2", dict(flop=True, height=200)),
    ("test_flip_flop", dict(flip=True, flop=True)),
    ("test_flip_flop2", dict(flip=True, flop=True, width=200, height=300)),
    ("test_horizontal_alignment", dict(halign="left")),
    ("test_horizontal_alignment2", dict(halign="center")),
    ("test_vertical_alignment", dict(valign="top")),
    ("test_vertical_alignment2", dict(valign="middle")),
    ("test_both_alignments", dict(halign="left", valign="top")),
    ("test_proper_meta", dict(meta=True)),
    ("test_trim_standard", dict(trim=True)),
    ("test_trim_pixel_and_tolerance", dict(trim=("bottom-right", 15))),
    ("test_trim_pixel_only", dict(trim=("top-left", None))),
    ("test_trim_tolerance_only", dict(trim=(None, 15))),
    ("test_manual_crop_1", dict(crop=((10, 20), (30, 40)))),
    ("test_manual_crop_2", dict(crop=((0, 0), (0, 0)))),
    ("test_smart_after_alignments", dict(smart=True, halign="left")),
]
UNSAFE_URL = [  # tests/test_url_composer.py UnsafeUrlTestCase
    ("test_should_return_a_valid_unsafe_url_with_no_params", {}),
    ("test_should_return_an_unsafe_url_with_width_and_height", dict(width=100, height=140)),
    ("test_should_return_an_unsafe_url_with_crop_and_smart", dict(width=100, height=140, smart=True)),
]
CRYPTO_KEY = "my-security-key"
CRYPTO_URL = [  # tests/test_cryptourl.py NewFormatUrlTestsMixin: (test, options, literal)
    ("test_generated_url_1", dict(width=300, height=200),
     "/8ammJH8D-7tXy6kU3lTvoXlhu4o=/300x200/my.server.com/some/path/to/image.jpg"),
    ("test_generated_url_2", dict(width=300, height=200, crop=((10, 10), (200, 200))),
     "/B35oBEIwztbc3jm7vsdqLez2C78=/10x10:200x200/300x200/my.server.com/some/path/to/image.jpg"),
    ("test_generated_url_3", dict(width=300, height=200, crop=((10, 10), (200, 200)),
                                  filters=("brightness(20)", "contrast(10)")),
     "/as8U2DbUUtTMgvPF26LkjS3MocY=/10x10:200x200/300x200/filters:brightness(20):contrast(10)/"
     "my.server.com/some/path/to/image.jpg"),
    ("test_should_not_get_an_unsafe_url_when_unsafe_is_false", dict(crop=((10, 20), (30, 40)), unsafe=False), None),
]


def add_libthumbor(cases):
    assert Url.regex() == REGEX_LITERAL
    src = f"{LT} tests/test_url.py"
    # parse_decrypted("") is None; the nearest request path is "/".
    cases.add_parse(f"{src} test_parsing_invalid_url (its '' as the request path '/')", "/")
    # The test parses without the unsafe/hash part; through thumbor's route "debug" is a hash.
    cases.add_parse(f"{src} test_parsing_complete_url", COMPLETE_URL)
    cases.add_parse(f"{src} test_parsing_complete_url ('/unsafe' prefixed)", "/unsafe" + COMPLETE_URL)
    got = parse("/unsafe" + COMPLETE_URL)
    assert all(got[k] == v for k, v in COMPLETE_EXPECTED.items()), got
    for name, options, literal in TEST_URL_GENERATE:
        url = cases.add_compose(f"{src} {name}", options, literal)
        cases.add_parse(f"{src} {name} (generated options + /some/image.jpg)", unsafe_path(url))

    src = f"{LT} tests/test_libthumbor.py test_usage_new_format"
    options = dict(width=300, height=200, smart=True, adaptive=False, fit_in=False,
                   horizontal_flip=False, vertical_flip=False, halign="center", valign="middle",
                   crop_left=0, crop_top=0, crop_right=0, crop_bottom=0, filters=[])
    cases.add_compose(f"{src} (its filters=[] left out)", {k: v for k, v in options.items() if k != "filters"}, "300x200/smart")
    image = "s.glbimg.com/et/bb/f/original/2011/03/24/VN0JiwzmOw0b0lg.jpg"
    cases.add_signed_url(src, CRYPTO_KEY, CryptoURL(key=CRYPTO_KEY).generate(
        width=300, height=200, smart=True, image_url=image))

    src = f"{LT} tests/test_url_composer.py"
    for name, options in URL_FOR:
        cases.add_parse(f"{src} {name} (url_for output, '/unsafe/' prefixed)",
                        "/unsafe/" + url_for(image_url=IMAGE_URL, **options))
    for name, options in UNSAFE_URL:
        cases.add_parse(f"{src} {name}", "/" + unsafe_url(image_url=IMAGE_URL, **options))

    src = f"{LT} tests/test_cryptourl.py"
    for name, options, literal in CRYPTO_URL:
        cases.add_signed_url(f"{src} {name}", CRYPTO_KEY,
                             CryptoURL(CRYPTO_KEY).generate(image_url=IMAGE_URL, **options), literal)
    cases.add_parse(f"{src} test_should_pass_unsafe_to_generate_and_get_an_unsafe_url",
                    "/" + CryptoURL(CRYPTO_KEY).generate(image_url=IMAGE_URL, crop=((10, 20), (30, 40)), unsafe=True))

    cases.add_sign(f"{LT} tests/url_signers/test_base64_hmac_sha1_signer.py test_can_sign_url",
                   "something", "10x11:12x13/-300x-300/center/middle/smart/some/image.jpg")


# --- thumbor 7.8.0 ------------------------------------------------------------------------

def thumbor_url_main(args):
    """thumbor-url (thumbor/url_composer.py main) output: the URL it prints."""
    from thumbor.url_composer import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(args)
    head, url, tail = out.getvalue().split("\n")
    assert head == "URL:" and tail == "", out.getvalue()
    return url


COMPOSER_MAIN = [  # tests/test_url_composer.py; (test, key, argv, literal)
    ("test_can_compose_url", "MY-SECURITY-KEY",
     ["-k", "MY-SECURITY-KEY", "-w", "200", "-e", "300", "myserver.com/myimg.jpg"],
     "/G_dykuWBGyEil5JnNh9cBke0Ajo=/200x300/myserver.com/myimg.jpg"),
    # The get_thumbor_params tests check the option dict only; these run the same options
    # through the command (width/height added where fit-in needs them).
    ("test_get_thumbor_params (same image; thumbor-url quotes it and keeps its leading '/')", "woot",
     ["-k", "woot", "/image/url.jpg"], None),
    ("test_get_thumbor_params_with_crop (-c is dropped: get_url_parts reads 'crop', not crop_left...)", "woot",
     ["-k", "woot", "-c", "300x200:400x500", "/image/url.jpg"], None),
    ("test_get_thumbor_params_fitin (with -w 300 -e 200)", "woot",
     ["-k", "woot", "-n", "-w", "300", "-e", "200", "/image/url.jpg"], None),
    ("test_get_thumbor_params_full_fitin (with -w 300 -e 200)", "woot",
     ["-k", "woot", "-n", "--full", "-w", "300", "-e", "200", "/image/url.jpg"], None),
    ("test_get_thumbor_params_adaptive_fitin (with -w 300 -e 200)", "woot",
     ["-k", "woot", "-n", "--adaptive", "-w", "300", "-e", "200", "/image/url.jpg"], None),
    ("test_get_thumbor_params_full_adaptive_fitin (with -w 300 -e 200)", "woot",
     ["-k", "woot", "-n", "--full", "--adaptive", "-w", "300", "-e", "200", "/image/url.jpg"], None),
    ("test_get_options (-k/-w/-e, every other flag added: -m -s -t -f -v -a right -i bottom --filters)", "MY-SECURITY-KEY",
     ["-k", "MY-SECURITY-KEY", "-w", "200", "-e", "300", "-m", "-s", "-t", "-f", "-v", "-a", "right",
      "-i", "bottom", "--filters", "quality(80)", "--filters", "grayscale()", "myserver.com/my img.jpg"], None),
]

# tests/handlers/test_base_handler*.py: every request path given as a literal.
HANDLER_PATHS = [
    ("test_base_handler.py", "test_can_get_image", "/unsafe/smart/image.jpg"),
    ("test_base_handler.py", "test_can_get_image_without_extension", "/unsafe/smart/image"),
    ("test_base_handler.py", "test_get_unknown_image_returns_not_found", "/unsafe/smart/imag"),
    ("test_base_handler.py", "test_can_get_signed_regular_image", "/_wIUeSaeHw8dricKG2MGhqu5thk=/smart/image.jpg"),
    ("test_base_handler.py", "test_url_without_unsafe_or_hash_fails", "/alabama1_ap620%C3%A9.jpg"),
    ("test_base_handler.py", "test_url_without_image", "/unsafe/"),
    ("test_base_handler.py", "test_utf8_encoded_image_name_with_encoded_url", "/lc6e3kkm_2Ww7NWho8HPOe-sqLU=/smart/alabama1_ap620%C3%A9.jpg"),
    ("test_base_handler.py", "test_url_with_encoded_hash", "/%D1%80=/alabama1_ap620%C3%A9.jpg"),
    ("test_base_handler.py", "test_image_with_spaces_on_url", "/unsafe/image%20space.jpg"),
    ("test_base_handler.py", "test_can_get_image_with_filter", "/5YRxzS2yxZxj9SZ50SoZ11eIdDI=/filters:fill(blue)/image.jpg"),
    ("test_base_handler.py", "test_can_get_image_with_invalid_quantization_table", "/unsafe/invalid_quantization.jpg"),
    ("test_base_handler.py", "test_getting_invalid_image_returns_bad_request", "/unsafe/image_invalid.jpg"),
    ("test_base_handler.py", "test_getting_invalid_watermark_returns_bad_request", "/unsafe/filters:watermark(boom.jpg,0,0,0)/image.jpg"),
    ("test_base_handler.py", "test_can_read_monochromatic_jpeg", "/unsafe/grayscale.jpg"),
    ("test_base_handler.py", "test_can_read_image_with_small_width_and_no_height", "/unsafe/0x0:1681x596/1x/image.jpg"),
    ("test_base_handler.py", "test_can_read_cmyk_jpeg", "/unsafe/cmyk.jpg"),
    ("test_base_handler.py", "test_can_read_cmyk_jpeg_as_png", "/unsafe/filters:format(png)/cmyk.jpg"),
    ("test_base_handler.py", "test_can_read_image_svg_with_px_units_and_convert_png", "/unsafe/Commons-logo.svg"),
    ("test_base_handler.py", "test_can_read_image_svg_with_inch_units_and_convert_png", "/unsafe/Commons-logo-inches.svg"),
    ("test_base_handler.py", "test_svg_with_px_units_and_convert_to_png_with_size", "/unsafe/400x500/Commons-logo.svg"),
    ("test_base_handler.py", "test_svg_with_inch_units_and_convert_to_png_with_size", "/unsafe/400x500/Commons-logo-inches.svg"),
    ("test_base_handler.py", "test_svg_with_px_units_and_convert_to_png_with_width", "/unsafe/fit-in/300x/Commons-logo.svg"),
    ("test_base_handler.py", "test_can_read_8bit_tiff_as_png", "/unsafe/gradient_8bit.tif"),
    ("test_base_handler.py", "test_can_read_16bit_lsb_tiff_as_png", "/unsafe/gradient_lsb_16bperchannel.tif"),
    ("test_base_handler.py", "test_can_read_16bit_msb_tiff_as_png", "/unsafe/gradient_msb_16bperchannel.tif"),
    ("test_base_handler.py", "test_avif_format", "/unsafe/filters:format(avif)/image.jpg"),
    ("test_base_handler.py", "test_avif_unavailable_format_png", "/unsafe/filters:format(avif)/1x1.png"),
    ("test_base_handler.py", "test_can_read_heif", "/unsafe/image.heic"),
    ("test_base_handler.py", "test_heif_format", "/unsafe/filters:format(heic)/image.jpg"),
    ("test_base_handler.py", "test_heif_quality_setting", "/unsafe/filters:format(heif)/image.jpg"),
    ("test_base_handler.py", "test_heif_unavailable_format_png", "/unsafe/filters:format(heif)/1x1.png"),
    ("test_base_handler_keeping_exif_copyright_tags.py", "test_should_not_return_exif_copyright_tags_with_copyright_tags", "/unsafe/filters:strip_exif()/thumbor-exif.png"),
    ("test_base_handler_keeping_exif_copyright_tags.py", "test_should_not_return_exif_copyright_tags", "/unsafe/20x20.jpg"),
    ("test_base_handler_respecting_orientation.py", "test_should_be_ok_when_orientation_exif", "/unsafe/10_years_of_Wikipedia_by_Guillaume_Paumier.jpg"),
    ("test_base_handler_with_auto_avif.py", "test_can_auto_convert_jpeg_to_avif", "/unsafe/image.jpg"),
    ("test_base_handler_with_auto_avif.py", "test_should_not_convert_animated_gifs_to_avif", "/unsafe/animated.gif"),
    ("test_base_handler_with_auto_avif.py", "test_shouldnt_convert_cmyk_to_avif_if_gif", "/unsafe/filters:format(gif)/cmyk.jpg"),
    ("test_base_handler_with_auto_avif.py", "test_shouldnt_convert_gif_to_avif_if_format_specified", "/unsafe/filters:format(gif)/image.jpg"),
    ("test_base_handler_with_auto_avif.py", "test_should_convert_to_avif_if_format_invalid", "/unsafe/filters:format(asdf)/image.jpg"),
    ("test_base_handler_with_auto_heif.py", "test_can_auto_convert_avif_to_heif", "/unsafe/image.avif"),
    ("test_base_handler_with_auto_jpg.py", "test_should_not_convert_to_jpg_if_image_has_transparency_with_accept_jpeg", "/unsafe/paletted-transparent.png"),
    ("test_base_handler_with_auto_png_to_jpg.py", "test_should_auto_convert_png_to_jpg", "/unsafe/Giunchedi%2C_Filippo_January_2015_01.png"),
    ("test_base_handler_with_auto_png_to_jpg.py", "test_shouldnt_auto_convert_png_to_jpg_if_png_has_transparency", "/unsafe/watermark.png"),
    ("test_base_handler_with_auto_webp.py", "test_shouldnt_add_vary_if_format_specified", "/unsafe/filters:format(webp)/image.jpg"),
    ("test_base_handler_with_cover.py", "test_can_get_image_cover", "/unsafe/filters:cover()/animated.gif"),
    ("test_base_handler_with_decompression_bomb.py", "test_should_bad_request_if_bigger_than_75_megapixels", "/unsafe/16384x16384.png"),
    ("test_base_handler_with_decompression_bomb.py", "test_should_bad_request_if_bigger_than_75_megapixels_jpeg", "/unsafe/9643x10328.jpg"),
    ("test_base_handler_with_different_storage_config.py", "test_meta", "/unsafe/meta/800x400/image.jpg"),
    ("test_base_handler_with_different_storage_config.py", "test_meta_with_unicode", "/unsafe/meta/200x300/alabama1_ap620%C3%A9.jpg"),
    ("test_base_handler_with_different_storage_config.py", "test_meta_frame_count_with_gif", "/unsafe/meta/animated.gif"),
    ("test_base_handler_with_different_storage_config.py", "test_max_bytes", "/unsafe/filters:max_bytes(35000)/Giunchedi%2C_Filippo_January_2015_01.jpg"),
    ("test_base_handler_with_different_storage_config.py", "test_max_bytes_impossible", "/unsafe/filters:max_bytes(1000)/Giunchedi%2C_Filippo_January_2015_01.jpg"),
    ("test_base_handler_with_different_storage_config.py", "test_meta_with_exif_orientation", "/unsafe/meta/0x0/Giunchedi%2C_Filippo_January_2015_01-cmyk-orientation-exif.jpg"),
    ("test_base_handler_with_engine_error.py", "test_should_release_ioloop_on_error_on_engine_exception", "/unsafe/fit-in/134x134/940x2.png"),
    ("test_base_handler_with_engine_error.py", "test_should_exec_other_operations_on_error_on_engine_exception", "/unsafe/fit-in/134x134/filters:equalize()/940x2.png"),
    ("test_base_handler_with_gifv.py", "test_should_convert_animated_gif_to_mp4_when_filter_without_params", "/unsafe/filters:gifv()/animated.gif"),
    ("test_base_handler_with_gifv.py", "test_should_convert_animated_gif_to_webm_when_filter_with_gifv_webm_param", "/unsafe/filters:gifv(webm)/animated.gif"),
    ("test_base_handler_with_gifv.py", "test_should_convert_animated_gif_to_mp4_with_filter_without_params", "/unsafe/filters:gifv(mp4):background_color(ff00ff)/animated.gif"),
    ("test_base_handler_with_jpegtran.py", "test_should_optimize_jpeg", "/unsafe/200x200/image.jpg"),
    ("test_base_handler_with_max_dimensions.py", "test_should_be_ok_but_150x150", "/unsafe/200x200/grayscale.jpg"),
    ("test_base_handler_with_max_dimensions.py", "test_should_return_original_image_size", "/unsafe/filters:format(jpeg)/20x20.jpg"),
    ("test_base_handler_with_max_dimensions.py", "test_should_return_original_image_size_with_normalize", "/unsafe/filters:format(jpeg)/weird_normalize_error.jpg"),
    ("test_base_handler_with_native_gif_handling.py", "test_should_be_ok_with_single_frame_gif", "/5Xr8gyuWE7jL_VB72K0wvzTMm2U=/animated-one-frame.gif"),
    ("test_base_handler_with_result_storage.py", "test_saves_image_to_result_storage", "/gTr2Xr9lbzIa2CT_dL_O0GByeR0=/animated.gif"),
    ("test_base_handler_with_result_storage.py", "test_saves_meta_to_result_storage", "/oGi9XL4nHJKGEKVHjHEp1Jg1KpM=/meta/animated.gif"),
    ("test_base_handler_with_stored_keys.py", "test_stored_security_key_with_regular_image", "/nty7gpBIRJ3GWtYDLLw6q1PgqTo=/smart/image.jpg"),
    ("test_base_handler_with_stored_keys.py", "test_stored_security_key_with_regular_image_with_querystring", "/Iw7LZGdr-hHj2gQ4ZzksP3llQHY=/smart/image.jpg%3Fts%3D1"),
    ("test_base_handler_with_stored_keys.py", "test_stored_security_key_with_regular_image_with_hash", "/fxOHtHcTZMyuAQ1YPKh9KWg7nO8=/smart/image.jpg%23something"),
    ("test_base_handler_without_unsafe.py", "test_hash_injection_in_image_path_is_rejected", "/_wIUeSaeHw8dricKG2MGhqu5thk=/sma/_wIUeSaeHw8dricKG2MGhqu5thk=/rt/image.jpg"),
    ("test_base_handler_without_unsafe.py", "test_url_encoded_hash_injection_in_image_path_is_rejected", "/_wIUeSaeHw8dricKG2MGhqu5thk=/sma/_wIUeSaeHw8dricKG2MGhqu5thk%3D/rt/image.jpg"),
]

# Signatures those tests send and expect thumbor to accept (200): (file, test, key, url, signature).
HANDLER_SIGNATURES = [
    ("test_base_handler.py", "test_can_get_signed_regular_image", "ACME-SEC", "smart/image.jpg", "_wIUeSaeHw8dricKG2MGhqu5thk="),
    ("test_base_handler.py", "test_utf8_encoded_image_name_with_encoded_url", "ACME-SEC", "smart/alabama1_ap620%C3%A9.jpg", "lc6e3kkm_2Ww7NWho8HPOe-sqLU="),
    ("test_base_handler.py", "test_can_get_image_with_filter", "ACME-SEC", "filters:fill(blue)/image.jpg", "5YRxzS2yxZxj9SZ50SoZ11eIdDI="),
    ("test_base_handler_with_native_gif_handling.py", "test_should_be_ok_with_single_frame_gif", "ACME-SEC", "animated-one-frame.gif", "5Xr8gyuWE7jL_VB72K0wvzTMm2U="),
    ("test_base_handler_with_result_storage.py", "test_saves_image_to_result_storage", "ACME-SEC", "animated.gif", "gTr2Xr9lbzIa2CT_dL_O0GByeR0="),
    ("test_base_handler_with_result_storage.py", "test_saves_meta_to_result_storage", "ACME-SEC", "meta/animated.gif", "oGi9XL4nHJKGEKVHjHEp1Jg1KpM="),
    ("test_base_handler_with_stored_keys.py", "test_stored_security_key_with_regular_image (the stored key)", "MYKEY", "smart/image.jpg", "nty7gpBIRJ3GWtYDLLw6q1PgqTo="),
    ("test_base_handler_with_stored_keys.py", "test_stored_security_key_with_regular_image_with_querystring (the stored key; raw %3F signed)", "MYKEY", "smart/image.jpg%3Fts%3D1", "Iw7LZGdr-hHj2gQ4ZzksP3llQHY="),
    ("test_base_handler_with_stored_keys.py", "test_stored_security_key_with_regular_image_with_hash (the stored key; raw %23 signed)", "MYKEY", "smart/image.jpg%23something", "fxOHtHcTZMyuAQ1YPKh9KWg7nO8="),
]

# thumbor 7.8.0 docs/*.rst: request paths of the example URLs (scheme and host removed).
DOCS_PATHS = [
    ("usage.rst", "/unsafe/-300x-200/left/top/smart/path/to/my/nice/image.jpg"),
    ("usage.rst", "/unsafe/meta/-300x-200/left/top/smart/path/to/my/nice/image.jpg"),
    ("getting_started.rst", "/unsafe/300x200/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("getting_started.rst", "/unsafe/300x0/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("getting_started.rst", "/unsafe/-0x-0/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("getting_started.rst", "/unsafe/filters:brightness(10):contrast(30)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("index.rst", "/unsafe/300x200/smart/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("index.rst", "/K97LekICOXT9MbO3X1u8BBkrjbu5/300x200/smart/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("hosting.rst", "/unsafe/300x200/http://s.glbimg.com/jo/g1/f/original/2012/03/16/supersonic-skydiver_fran.jpg"),
    ("security.rst", "/unsafe/300x9999/smart/path/to/image.jpg"),
    ("security.rst", "/unsafe/9999x9999/smart/path/to/image.jpg"),
    ("security.rst", "/1234567890123456789012345678/300x200/smart/path/to/image.jpg"),
    ("enabling_detectors.rst", "/unsafe/debug/200x400/smart/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("crop_and_resize_algorithms.rst", "/unsafe/400x600/filters:horizontal_align(center)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("extract_focal_points.rst", "/unsafe/240x220:480x260/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("extract_focal_points.rst", "/unsafe/300x100/filters:extract_focal()/localhost:8888/unsafe/240x220:480x260/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("extract_focal_points.rst", "/unsafe/300x100/localhost:8888/unsafe/240x220:480x260/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("focal.rst", "/unsafe/400x100/filters:focal(146x206:279x360)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("filling.rst", "/unsafe/fit-in/300x300/filters:fill(auto)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("filling.rst", "/unsafe/fit-in/300x300/filters:fill(blur)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("filling.rst", "/unsafe/fit-in/300x300/filters:fill(add8e6)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("filling.rst", "/unsafe/fit-in/300x225/filters:fill(blue,1)/https://github.com/thumbor/thumbor/wiki/dice_transparent_background.png"),
    ("filling.rst", "/unsafe/fit-in/300x225/filters:fill(auto,true)/https://github.com/thumbor/thumbor/wiki/dice_transparent_background.png"),
    ("background_color.rst", "/unsafe/fit-in/300x300/filters:background_color(f00)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fdocs%2Fimages%2Fdice_transparent_background.png"),
    ("upscale.rst", "/unsafe/fit-in/600x500/filters:upscale()/https://raw.githubusercontent.com/thumbor/thumbor/e86324e49d7e53acc2a8057e43f3fdd2ca5cea75/docs/images/dice_transparent_background.png"),
    ("stretch.rst", "/unsafe/200x100/filters:stretch()/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("convolution.rst", "/unsafe/filters:convolution(1;2;1;2;4;2;1;2;1,3,true)/http://upload.wikimedia.org/wikipedia/commons/5/50/Vd-Orig.png"),
    ("convolution.rst", "/unsafe/filters:convolution(-1;-1;-1;-1;8;-1;-1;-1;-1,3,false)/http://upload.wikimedia.org/wikipedia/commons/5/50/Vd-Orig.png"),
    ("round_corners.rst", "/unsafe/filters:round_corner(20|40,0,0,0)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("round_corners.rst", "/unsafe/filters:round_corner(30,0,0,0,1)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("rgb.rst", "/unsafe/filters:rgb(20,-20,40)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("sharpen.rst", "/unsafe/filters:sharpen(2,1.0,true)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("saturation.rst", "/unsafe/filters:saturation(-40)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("proportion.rst", "/unsafe/filters:proportion(0.5)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("max_bytes.rst", "/unsafe/filters:max_bytes(7500)/https%3A%2F%2Fgithub.com%2Fthumbor%2Fthumbor%2Fraw%2Fmaster%2Fexample.jpg"),
    ("strip_icc.rst", "/unsafe/filters:strip_icc()/http://videoprocessing.ucsd.edu/~stanleychan/research/pix/Blurred_foreman_0005.png"),
    ("gifv.rst", "/unsafe/filters:gifv():background_color(magenta)/http://localhost/livingroom.gif"),
    ("cover.rst", "/unsafe/filters:cover()/http://server.my/animated_static.gif"),
    # docs/watermark.rst writes these without unsafe/ or a signature: "filters:watermark(http:" is then the hash.
    ("watermark.rst", "/filters:watermark(http://my.site.com/img.png,-10,-10,50)/some/image.jpg"),
    ("watermark.rst", "/filters:watermark(http://my.site.com/img.png,10p,-20p,50)/some/image.jpg"),
]
# docs/libraries.rst "Scenario" signed URLs (key 'my-security-key').
DOCS_SIGNED = [
    ("libraries.rst Scenario 1", "/8ammJH8D-7tXy6kU3lTvoXlhu4o=/300x200/my.server.com/some/path/to/image.jpg"),
    ("libraries.rst Scenario 3", "/Ps3ORJDqxlSQ8y00T29GdNAh2CY=/meta/my.server.com/some/path/to/image.jpg"),
    ("libraries.rst Scenario 4", "/-2NHpejRK2CyPAm61FigfQgJBxw=/smart/my.server.com/some/path/to/image.jpg"),
    ("libraries.rst Scenario 5", "/uvLnA6TJlF-Cc-L8z9pEtfasO3s=/fit-in/my.server.com/some/path/to/image.jpg"),
    ("libraries.rst Scenario 6", "/ZZtPCw-BLYN1g42Kh8xTcRs0Qls=/filters:brightness(10):contrast(20)/my.server.com/some/path/to/image.jpg"),
]


def add_thumbor(cases):
    src = f"{TH} tests/test_url_composer.py"
    for name, key, argv, literal in COMPOSER_MAIN:
        cases.add_signed_url(f"{src} {name}", key, thumbor_url_main(argv), literal)

    src = f"{TH} tests/handlers"
    for test_file, test, path in HANDLER_PATHS:
        cases.add_parse(f"{src}/{test_file} {test}", path)
    cases.add_parse(f"{src}/test_base_handler.py test_can_get_unicode_image",
                    "/unsafe/" + quote("15967251_212831_19242645_АгатавЗоопарке.jpg".encode("utf-8")))
    cases.add_parse(f"{src}/test_base_handler_with_http_loader.py test_image_with_http_utf8_url",
                    quote("/unsafe/http://test.com/maracujá.jpg".encode("utf-8")))
    for test_file, test, key, url, sig in HANDLER_SIGNATURES:
        cases.add_sign(f"{src}/{test_file} {test}", key, url, sig)

    crypto = CryptoURL("ACME-SEC")
    for test, image in [("test_should_auto_convert_png_to_jpg_with_signed_images", "Giunchedi%2C_Filippo_January_2015_01.png"),
                        ("test_shouldnt_auto_convert_png_to_jpg_if_png_has_transparency_with_signed_images", "watermark.png")]:
        cases.add_signed_url(f"{src}/test_base_handler_with_auto_png_to_jpg.py {test}", "ACME-SEC", crypto.generate(image_url=image))
    # test_base_handler_with_http_loader.py signs URLs of thumbor URLs; get_url() is
    # http://127.0.0.1:<random port>, fixed to 8888 here.
    get_url = "http://127.0.0.1:8888{}".format
    src_http = f"{src}/test_base_handler_with_http_loader.py"
    inner = get_url(crypto.generate(image_url=quote("http://test.com/smart/image.jpg")))
    cases.add_signed_url(f"{src_http} test_image_already_generated_by_thumbor (port 8888)", "ACME-SEC",
                         crypto.generate(image_url=quote(inner)))
    inner = get_url(crypto.generate(image_url=quote(get_url(crypto.generate(image_url=quote("http://test.com/smart/alabama1_ap620é"))))))
    cases.add_signed_url(f"{src_http} test_image_already_generated_by_thumbor_2_times (port 8888)", "ACME-SEC",
                         crypto.generate(image_url=quote(inner)))
    inner = get_url(quote("/unsafe/http://test.com/maracujá.jpg".encode("utf-8")))
    cases.add_signed_url(f"{src_http} test_image_with_utf8_url (port 8888)", "ACME-SEC",
                         crypto.generate(image_url=quote(inner)))

    for doc, path in DOCS_PATHS:
        cases.add_parse(f"{TH} docs/{doc}", path)
    for doc, url in DOCS_SIGNED:
        _, sig, rest = url.split("/", 2)
        cases.add_sign(f"{TH} docs/{doc}", CRYPTO_KEY, rest, sig)
        cases.add_parse(f"{TH} docs/{doc}", url)


# --- Strata's own cases --------------------------------------------------------------------

EDGE_PATHS = [
    ("image equal to a keyword", "/unsafe/smart"),
    ("'smart/' then nothing: the smart group backtracks and the image is 'smart/'", "/unsafe/smart/"),
    ("smart then an image called smart", "/unsafe/smart/smart"),
    ("a dimension segment without an image after it", "/unsafe/300x200"),
    ("a dimension segment and a trailing slash, nothing after", "/unsafe/300x200/"),
    ("filters and nothing after", "/unsafe/filters:quality(80)"),
    ("filters, a slash, nothing after", "/unsafe/filters:quality(80)/"),
    ("'unsafe' alone", "/unsafe"),
    ("unsafe twice", "/unsafe/unsafe/a.jpg"),
    ("upper-case UNSAFE is a hash", "/UNSAFE/a.jpg"),
    ("flip both axes with zero sizes", "/unsafe/-0x-0/a.jpg"),
    ("'x' alone is a dimension segment", "/unsafe/x/a.jpg"),
    ("'-x-' flips with no numbers", "/unsafe/-x-/a.jpg"),
    ("zero by zero", "/unsafe/0x0/a.jpg"),
    ("orig by orig", "/unsafe/origxorig/a.jpg"),
    ("orig width, number height", "/unsafe/origx300/a.jpg"),
    ("flipped orig", "/unsafe/-origx-orig/a.jpg"),
    ("width only", "/unsafe/300x/a.jpg"),
    ("height only", "/unsafe/x300/a.jpg"),
    ("upper-case X is not a dimension", "/unsafe/300X200/a.jpg"),
    ("double minus is not a dimension", "/unsafe/--300x200/a.jpg"),
    ("plus sign is not a dimension", "/unsafe/+300x200/a.jpg"),
    ("large numbers (2^31, Int64.max; thumbor's int() takes any size)", "/unsafe/2147483648x9223372036854775807/a.jpg"),
    ("leading zeros in sizes", "/unsafe/0300x0200/a.jpg"),
    ("crop with leading zeros", "/unsafe/0010x020:0300x0400/a.jpg"),
    ("crop all zeros", "/unsafe/0x0:0x0/a.jpg"),
    ("crop right/bottom before left/top", "/unsafe/300x300:100x100/a.jpg"),
    ("malformed crop is part of the image", "/unsafe/10x20:30/a.jpg"),
    ("crop with a large number", "/unsafe/0x0:9223372036854775807x1/a.jpg"),
    ("trim", "/unsafe/trim/a.jpg"),
    ("trim:top-left", "/unsafe/trim:top-left/a.jpg"),
    ("trim with both options", "/unsafe/trim:bottom-right:10/a.jpg"),
    ("trim tolerance without position (thumbor then reads '10' as the position)", "/unsafe/trim:10/a.jpg"),
    ("trim::10 (libthumbor url_for's form) does not match the trim group", "/unsafe/trim::10/a.jpg"),
    ("unknown trim position", "/unsafe/trim:top-right/a.jpg"),
    ("trim with an empty tolerance", "/unsafe/trim:top-left:/a.jpg"),
    ("every part, in order", "/unsafe/debug/meta/trim:top-left:5/10x10:20x20/adaptive-full-fit-in/-300x-200/right/bottom/smart/filters:quality(1)/x.jpg"),
    ("adaptive-fit-in without sizes", "/unsafe/adaptive-fit-in/a.jpg"),
    ("full-fit-in", "/unsafe/full-fit-in/300x200/a.jpg"),
    ("full-adaptive-fit-in (wrong order) is part of the image", "/unsafe/full-adaptive-fit-in/300x200/a.jpg"),
    ("fit-in twice", "/unsafe/fit-in/fit-in/a.jpg"),
    ("smart before fit-in (wrong order)", "/unsafe/smart/fit-in/300x200/a.jpg"),
    ("dimensions before fit-in (wrong order)", "/unsafe/300x200/fit-in/a.jpg"),
    ("valign before halign (wrong order)", "/unsafe/top/left/a.jpg"),
    ("explicit default alignments", "/unsafe/center/middle/a.jpg"),
    ("halign only, right", "/unsafe/right/a.jpg"),
    ("valign only, bottom", "/unsafe/bottom/a.jpg"),
    ("filters before fit-in (wrong order)", "/unsafe/filters:fill(blur,true)/fit-in/300x200/a.jpg"),
    ("filters before smart (wrong order)", "/unsafe/filters:quality(1)/smart/a.jpg"),
    ("debug after meta (wrong order)", "/unsafe/meta/debug/a.jpg"),
    ("meta before unsafe: 'meta' becomes the hash", "/meta/unsafe/a.jpg"),
    ("debug without unsafe: 'debug' becomes the hash", "/debug/a.jpg"),
    ("no unsafe, no hash, one segment", "/a.jpg"),
    ("empty parentheses filter", "/unsafe/filters:grayscale()/a.jpg"),
    ("several ')/' in the filters: the lazy group stops at the first", "/unsafe/filters:a(b)/c(d)/e.jpg"),
    ("watermark URL with a ')/' inside: the filter is cut there", "/unsafe/filters:watermark(http://x.com/a(1)/b.png,0,0,0)/img.jpg"),
    ("watermark with an http URL, then a full-URL image", "/unsafe/300x200/filters:watermark(http://a.com/w.png,10,-10,50):quality(80)/http://b.com/x.jpg"),
    ("watermark with center, repeat and percentages", "/unsafe/filters:watermark(w.png,center,repeat,30,20p,none)/a.jpg"),
    ("'filters:' with no closing parenthesis", "/unsafe/filters:quality(80/a.jpg"),
    ("'filters:' with nothing", "/unsafe/filters:/a.jpg"),
    ("filters with a percent-encoded parenthesis", "/unsafe/filters:quality%2880%29/a.jpg"),
    ("hash containing '='", "/abc=/a.jpg"),
    ("hash containing %3D", "/abc%3D/300x200/a.jpg"),
    ("hash containing %2F (an encoded slash does not split)", "/ab%2Fc/a.jpg"),
    ("the test key's hash, percent-encoded", "/_wIUeSaeHw8dricKG2MGhqu5thk%3D/smart/image.jpg"),
    ("a 100-character hash", "/" + "A" * 100 + "/a.jpg"),
    ("percent-encoded UTF-8 image", "/unsafe/maracuj%C3%A1.jpg"),
    ("raw non-ASCII image (over HTTP/1 tornado decodes the request line as latin-1, so raw UTF-8 bytes arrive as mojibake)", "/unsafe/maracujá.jpg"),
    ("raw CJK and emoji image", "/unsafe/300x200/画像🖼.jpg"),
    ("percent-encoded slashes in the image", "/unsafe/300x200/http%3A%2F%2Fexample.com%2Fa%20b.jpg"),
    ("image with an encoded query", "/unsafe/a.jpg%3Fx%3D1%26y%3D2"),
    ("full URL image", "/unsafe/http://host/a.jpg"),
    ("full https URL image after sizes and smart", "/unsafe/300x200/smart/https://s.glbimg.com/et/bb/f/original/a.jpg"),
    ("image URL with a port and a query-like part", "/unsafe/fit-in/300x200/http://host:8080/a.jpg%3Fv=1"),
    ("double slash after unsafe", "/unsafe//a.jpg"),
    ("double slash before the image", "/unsafe/300x200//a.jpg"),
    ("leading double slash: '/unsafe' becomes the hash", "//unsafe/a.jpg"),
    ("only slashes", "//"),
    ("three slashes", "///"),
    ("trailing slash after the image", "/unsafe/a.jpg/"),
    ("trailing slash, image 'smart/'", "/unsafe/300x200/smart/"),
    ("newline inside the image: '.' does not match it (regex level: tornado's HTTP/1 request-line parser refuses raw CR, LF, TAB and space before routing)", "/unsafe/a\nb.jpg"),
    ("trailing newline: Python's '$' matches before it (regex level, unreachable over HTTP/1)", "/unsafe/a.jpg\n"),
    ("newline in the hash position (regex level, unreachable over HTTP/1)", "/ab\nc/a.jpg"),
    ("percent-encoded newline", "/unsafe/a%0Ab.jpg"),
    ("carriage return in the image: '.' matches it (regex level, unreachable over HTTP/1)", "/unsafe/a\rb.jpg"),
    ("tab in the image (regex level, unreachable over HTTP/1)", "/unsafe/a\tb.jpg"),
    ("space in the image (regex level, unreachable over HTTP/1)", "/unsafe/a b.jpg"),
    ("'healthcheck' (thumbor routes /healthcheck/?$ to HealthcheckHandler before this regex)", "/healthcheck"),
    ("dimension segment that looks like a crop", "/unsafe/300x200:400x500/a.jpg"),
    ("meta alone", "/unsafe/meta/a.jpg"),
    ("debug alone", "/unsafe/debug/a.jpg"),
    ("signed, every part", "/h4sh/debug/meta/trim/1x2:3x4/fit-in/-10x-20/left/top/smart/filters:a():b(1,2)/i.png"),
]

SIGN_OWN = [  # (why, key, url)
    ("unicode key (UrlSigner encodes keys as UTF-8; CryptoURL as latin-1)", "téste", "300x200/image.jpg"),
    ("Cyrillic key", "ключ", "smart/image.jpg"),
    ("CJK and emoji key", "鍵🔑", "fit-in/300x200/image.jpg"),
    ("key with spaces", "my secret key", "image.jpg"),
    ("one-byte key", "k", "image.jpg"),
    ("64-byte key (one SHA-1 block)", "k" * 64, "image.jpg"),
    ("65-byte key (hashed first by HMAC)", "k" * 65, "image.jpg"),
    ("200-byte key", "0123456789" * 20, "300x200/smart/image.jpg"),
    ("empty url", "ACME-SEC", ""),
    ("one-character url", "ACME-SEC", "a"),
    ("url '/'", "ACME-SEC", "/"),
    ("leading slash changes the signature", "ACME-SEC", "/smart/image.jpg"),
    ("trailing slash changes the signature", "ACME-SEC", "smart/image.jpg/"),
    ("url that starts with unsafe/", "ACME-SEC", "unsafe/smart/image.jpg"),
    ("percent-encoded UTF-8 (what thumbor signs: the raw path)", "ACME-SEC", "smart/maracuj%C3%A1.jpg"),
    ("decoded UTF-8 (differs from the raw path's signature)", "ACME-SEC", "smart/maracujá.jpg"),
    ("lower-case percent-encoding differs from upper-case", "ACME-SEC", "smart/maracuj%c3%a1.jpg"),
    ("encoded full URL", "ACME-SEC", "300x200/http%3A%2F%2Fexample.com%2Fa%20b.jpg"),
    ("raw full URL", "ACME-SEC", "300x200/http://example.com/a.jpg"),
    ("filters with a watermark URL", "ACME-SEC", "filters:watermark(http://a.com/w.png,10,-10,50):quality(80)/http://b.com/x.jpg"),
    ("filters with several ')/'", "ACME-SEC", "filters:a(b)/c(d)/e.jpg"),
    ("every part", "ACME-SEC", "debug/meta/trim:bottom-right:10/10x10:20x20/adaptive-full-fit-in/-300x-200/right/bottom/smart/filters:quality(1)/x.jpg"),
    ("encoded query in the image", "ACME-SEC", "a.jpg%3Fx%3D1%26y%3D2"),
    ("image with '='", "ACME-SEC", "a=b.jpg"),
    ("a signature-looking segment inside the url", "ACME-SEC", "sma/_wIUeSaeHw8dricKG2MGhqu5thk=/rt/image.jpg"),
    ("newline in the url", "ACME-SEC", "a\nb.jpg"),
    ("thumbor's default SECURITY_KEY", "MY_SECURE_KEY", "300x200/smart/image.jpg"),
]

COMPOSE_OWN = [  # (why, options)
    ("width only", dict(width=300)),
    ("height only", dict(height=200)),
    ("orig width", dict(width="orig", height=200)),
    ("orig both", dict(width="orig", height="orig")),
    ("horizontal flip with a width", dict(width=300, height=200, horizontal_flip=True)),
    ("vertical flip with a height", dict(height=200, vertical_flip=True)),
    ("both flips and no sizes: '-0x-0'", dict(horizontal_flip=True, vertical_flip=True)),
    ("horizontal flip, zero width", dict(height=200, horizontal_flip=True)),
    ("flipped orig", dict(width="orig", height="orig", horizontal_flip=True, vertical_flip=True)),
    ("fit-in with sizes", dict(fit_in=True, width=300, height=200)),
    ("adaptive fit-in", dict(fit_in=True, adaptive=True, width=300, height=200)),
    ("full fit-in", dict(fit_in=True, full=True, width=300, height=200)),
    ("adaptive full fit-in", dict(fit_in=True, adaptive=True, full=True, width=300, height=200)),
    ("adaptive and full without fit_in write nothing", dict(adaptive=True, full=True, width=300)),
    ("halign left", dict(halign="left")),
    ("halign right, valign bottom", dict(halign="right", valign="bottom")),
    ("valign top", dict(valign="top")),
    ("explicit defaults write nothing", dict(halign="center", valign="middle")),
    ("smart", dict(smart=True)),
    ("meta", dict(meta=True)),
    ("debug", dict(debug=True)),
    ("trim True", dict(trim=True)),
    ("trim position", dict(trim="top-left")),
    ("trim position and tolerance", dict(trim="bottom-right:10")),
    ("crop", dict(crop_left=10, crop_top=20, crop_right=300, crop_bottom=400)),
    ("crop from the origin", dict(crop_left=0, crop_top=0, crop_right=100, crop_bottom=100)),
    ("crop and sizes", dict(crop_left=10, crop_top=20, crop_right=300, crop_bottom=400, width=100, height=100)),
    ("one filter", dict(filters="quality(80)")),
    ("several filters", dict(filters="quality(80):format(webp):grayscale()")),
    ("watermark filter with a URL", dict(filters="watermark(http://a.com/w.png,-10,center,50,20,none)")),
    ("everything but debug", dict(meta=True, trim=True, crop_left=1, crop_top=2, crop_right=3, crop_bottom=4,
                                  fit_in=True, full=True, width=30, height=40, vertical_flip=True,
                                  halign="right", valign="bottom", smart=True, filters="blur(2)")),
    ("sizes zero write nothing", dict(width=0, height=0)),
]


def add_strata(cases):
    for why, path in EDGE_PATHS:
        cases.add_parse(f"strata: {why}", path)
    for why, key, url in SIGN_OWN:
        cases.add_sign(f"strata: {why}", key, url)
    for why, options in COMPOSE_OWN:
        url = cases.add_compose(f"strata: {why}", options)
        cases.add_parse(f"strata: compose round trip: {why}", unsafe_path(url, "a.jpg"))


ABOUT = (
    "URL cases ported from thumbor 7.8.0 and libthumbor 2.0.2 (both MIT licence; thumbor "
    "copyright (c) 2011 globo.com, libthumbor copyright (c) 2011 Bernardo Heynemann): request "
    "paths, keys and options copied from their tests and docs (source names the repository, file "
    "and test) plus Strata's own ('strata: ...'). Every expected value was computed by the real "
    "code, none written by hand: 'parse' matches 'path' with the regex thumbor's "
    "ThumborServiceApp registers for ImagingHandler (libthumbor Url.regex() + '$', as tornado's "
    "PathMatches compiles it, re.match on the whole raw request path) and normalises the groups "
    "with Url.parse_decrypted, plus 'unsafe' (bool) and 'hash' (the raw group or null); "
    "'expected' is null when the route does not match. All parse values are the raw matched text, "
    "still percent-encoded (tornado unquotes each group before thumbor's handler sees it). 'sign' "
    "is libthumbor's UrlSigner(key).signature(url) (urlsafe base64 HMAC-SHA1 of the UTF-8 url "
    "with the UTF-8 key). 'compose' is Url.generate_options(**options). Regenerate with: "
    ".loadtest/venv/bin/python Scripts/thumbor/port-url-cases.py (add --check to verify)."
)


def build():
    global ROUTE
    check_versions()
    ROUTE = thumbor_route()
    cases = Cases()
    add_libthumbor(cases)
    add_thumbor(cases)
    add_strata(cases)
    doc = {"about": ABOUT, "parse": cases.parse, "sign": cases.sign, "compose": cases.compose}
    return json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def main():
    text = build()
    if sys.argv[1:] == ["--check"]:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(f"{OUT} is stale: run {sys.argv[0]}")
        return
    if sys.argv[1:]:
        sys.exit(__doc__)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    data = json.loads(text)
    print(f"{os.path.relpath(OUT)}: " + ", ".join(f"{k} {len(data[k])}" for k in ("parse", "sign", "compose")))


if __name__ == "__main__":
    main()
