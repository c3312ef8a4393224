# See __init__.py: lxml.etree as the standard library's ElementTree.
from xml.etree.ElementTree import *  # noqa: F401,F403
