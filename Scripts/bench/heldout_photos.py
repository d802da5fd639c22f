#!/usr/bin/env python3
"""Makes the held-out photos of the README's source-tier table (not in the tests or Fixtures).

Usage: python3 Scripts/bench/heldout_photos.py [OUT_DIR]   (default /tmp/strata-heldout)
Needs apt-get (Debian's plasma-workspace-wallpapers 4:5.27.5-2, the package the Fixtures come
from; downloaded, not installed) and Pillow. Writes:
  autumn-2560x1600.jpg                 "Autumn", the package's bytes (progressive, 4:4:4)
  bythewater-2560x1600.jpg             "BytheWater", the package's bytes (baseline, 4:2:0)
  bythewater-1024x640-progressive.jpg  BytheWater, Lanczos to 1024x640, q85 4:2:0 progressive
  autumn-1024x640-progressive-444.jpg  Autumn, Lanczos to 1024x640, q90 4:4:4 progressive
  autumn-2560x1600.webp                Autumn, lossy q80
  bythewater-1280x800.webp             BytheWater, Lanczos to 1280x800, lossy q85
With --uhd, also the 3840x2160 WebPs of issue 50's thumbnail check (the package's 5120x2880
photos Flow, Shell, Volna and SafeLanding, Lanczos to 3840x2160, lossy q80 method 4), and two
variants of them: volna with an alpha gradient, flow at q90 method 6:
  flow-3840x2160.webp  shell-3840x2160.webp  volna-3840x2160.webp  safelanding-3840x2160.webp
  volna-alpha-3840x2160.webp  flow-q90-3840x2160.webp
"""
import glob, os, shutil, subprocess, sys, tempfile

from PIL import Image

args = [a for a in sys.argv[1:] if a != "--uhd"]
uhd = "--uhd" in sys.argv[1:]
out = args[0] if args else "/tmp/strata-heldout"
os.makedirs(out, exist_ok=True)
with tempfile.TemporaryDirectory() as work:
    subprocess.run(["apt-get", "download", "plasma-workspace-wallpapers"], cwd=work, check=True)
    deb = glob.glob(os.path.join(work, "*.deb"))[0]
    subprocess.run(["dpkg-deb", "-x", deb, os.path.join(work, "x")], check=True)
    walls = os.path.join(work, "x", "usr", "share", "wallpapers")
    for name, dest in (("Autumn", "autumn-2560x1600.jpg"), ("BytheWater", "bythewater-2560x1600.jpg")):
        shutil.copy(os.path.join(walls, name, "contents", "images", "2560x1600.jpg"), os.path.join(out, dest))
    if uhd:
        for name in ("Flow", "Shell", "Volna", "SafeLanding"):
            photo = Image.open(os.path.join(walls, name, "contents", "images", "5120x2880.jpg")).convert("RGB")
            photo = photo.resize((3840, 2160), Image.LANCZOS)
            photo.save(os.path.join(out, f"{name.lower()}-3840x2160.webp"), quality=80, method=4)
            if name == "Volna":
                photo.putalpha(Image.linear_gradient("L").resize(photo.size))
                photo.save(os.path.join(out, "volna-alpha-3840x2160.webp"), quality=80, method=4)
            if name == "Flow":
                photo.save(os.path.join(out, "flow-q90-3840x2160.webp"), quality=90, method=6)
autumn = Image.open(os.path.join(out, "autumn-2560x1600.jpg")).convert("RGB")
water = Image.open(os.path.join(out, "bythewater-2560x1600.jpg")).convert("RGB")
water.resize((1024, 640), Image.LANCZOS).save(
    os.path.join(out, "bythewater-1024x640-progressive.jpg"), quality=85, progressive=True, subsampling=2)
autumn.resize((1024, 640), Image.LANCZOS).save(
    os.path.join(out, "autumn-1024x640-progressive-444.jpg"), quality=90, progressive=True, subsampling=0)
autumn.save(os.path.join(out, "autumn-2560x1600.webp"), quality=80)
water.resize((1280, 800), Image.LANCZOS).save(os.path.join(out, "bythewater-1280x800.webp"), quality=85)
print("wrote the held-out photos to", out)
