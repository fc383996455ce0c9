@_exported import struct Checksums.SHA256
