@_exported import struct Images.SHA256
