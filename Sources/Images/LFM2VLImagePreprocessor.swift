/// LFM2-VL's image preprocessing exactly as llama.cpp's libmtmd does it (`mtmd_image_
/// preprocessor_lfm2`): an image small enough is resized to a multiple of the patch grid
/// ("smart resize") and becomes one slice; a larger one is fitted into a grid of 512x512 tiles
/// and gets a smart-resized thumbnail after them. Every slice is normalized to floats.
///
/// The arithmetic follows llama.cpp's types (float32 for the smart resize and the grid
/// choice, double for the tiling threshold), so sizes agree on every input, and the resize is
/// Pillow's bilinear filter, so pixels agree byte for byte.
public struct LFM2VLImagePreprocessor: Sendable {
    /// The parameters: from the mmproj file (`clip.vision.patch_size`,
    /// `clip.vision.projector.scale_factor`, `clip.vision.image_mean`/`image_std`) and the
    /// ones llama.cpp fixes for the `lfm2` projector (token limits, tiles).
    public struct Configuration: Sendable, Equatable {
        /// Side of a vision patch in pixels (16 for LFM2-VL).
        public var patchSize: Int
        /// Patches merged per side into one token by the pixel unshuffle (2 for LFM2-VL).
        public var mergeFactor: Int
        /// Fewest tokens a single slice is resized to reach (llama.cpp: 64).
        public var minImageTokens: Int
        /// Most tokens a single slice may take before it is shrunk (llama.cpp: 256).
        public var maxImageTokens: Int
        /// Side of a tile (llama.cpp: 512).
        public var tileSize: Int
        /// Fewest tiles of a grid (llama.cpp: 2).
        public var minTiles: Int
        /// Most tiles of a grid (llama.cpp: 10).
        public var maxTiles: Int
        /// An image tiles when its rounded area exceeds this many times the largest slice
        /// area (llama.cpp: 2).
        public var maxPixelsTolerance: Float
        /// Per-channel (R, G, B) mean of the normalization (`clip.vision.image_mean`).
        public var imageMean: SIMD3<Float>
        /// Per-channel standard deviation of the normalization (`clip.vision.image_std`).
        public var imageStd: SIMD3<Float>

        /// LFM2-VL's values, as llama.cpp uses them with an LFM2-VL mmproj file.
        public init(
            patchSize: Int = 16, mergeFactor: Int = 2, minImageTokens: Int = 64, maxImageTokens: Int = 256, tileSize: Int = 512,
            minTiles: Int = 2, maxTiles: Int = 10, maxPixelsTolerance: Float = 2, imageMean: SIMD3<Float> = SIMD3(repeating: 0.5),
            imageStd: SIMD3<Float> = SIMD3(repeating: 0.5)
        ) {
            self.patchSize = patchSize
            self.mergeFactor = mergeFactor
            self.minImageTokens = minImageTokens
            self.maxImageTokens = maxImageTokens
            self.tileSize = tileSize
            self.minTiles = minTiles
            self.maxTiles = maxTiles
            self.maxPixelsTolerance = maxPixelsTolerance
            self.imageMean = imageMean
            self.imageStd = imageStd
        }

        /// Pixels per token side: patch size x merge factor (32), the multiple slices align to.
        public var alignment: Int { patchSize * mergeFactor }
        /// Smallest slice area: `minImageTokens` tokens of alignment^2 pixels (65,536).
        public var minPixels: Int { minImageTokens * alignment * alignment }
        /// Largest slice area (262,144).
        public var maxPixels: Int { maxImageTokens * alignment * alignment }
    }

    /// The parameters, as checked by `init`.
    public let configuration: Configuration
    /// Candidate grids (columns, rows), by increasing tile count.
    private let grids: [TileGrid]

    /// A preprocessor with `configuration`, checked for values that would make no sense (and
    /// could come from a damaged mmproj file).
    public init(configuration: Configuration = Configuration()) throws(ImagePreprocessingError) {
        let c = configuration
        func check(_ ok: Bool, _ field: String, _ value: String, _ rule: String) throws(ImagePreprocessingError) {
            if !ok { throw .invalidConfiguration(field: field, value: value, rule: rule) }
        }
        try check((1...1024).contains(c.patchSize), "patchSize", "\(c.patchSize)", "1 to 1024")
        try check((1...16).contains(c.mergeFactor), "mergeFactor", "\(c.mergeFactor)", "1 to 16")
        try check(c.minImageTokens >= 1, "minImageTokens", "\(c.minImageTokens)", "at least 1")
        try check(
            c.maxImageTokens >= c.minImageTokens && c.maxImageTokens <= 16_384, "maxImageTokens", "\(c.maxImageTokens)",
            "minImageTokens to 16,384")
        try check(
            c.tileSize > 0 && c.tileSize % c.alignment == 0 && c.tileSize <= 8192, "tileSize", "\(c.tileSize)",
            "a multiple of patchSize x mergeFactor, at most 8192")
        try check(
            c.minTiles >= 1 && c.maxTiles >= c.minTiles && c.maxTiles <= 64, "minTiles/maxTiles", "\(c.minTiles)/\(c.maxTiles)",
            "1 <= min <= max <= 64")
        // The tile canvas (tileSize x columns by tileSize x rows) must stay a resizable size.
        try check(
            c.tileSize * c.maxTiles <= PillowBilinear.maxSide && c.tileSize * c.tileSize * c.maxTiles <= 1 << 26, "tileSize x maxTiles",
            "\(c.tileSize) x \(c.maxTiles)", "at most 65,536 pixels a side and 2^26 pixels in all")
        try check(c.maxPixelsTolerance.isFinite && c.maxPixelsTolerance > 0, "maxPixelsTolerance", "\(c.maxPixelsTolerance)", "positive")
        for channel in 0..<3 {
            try check(c.imageMean[channel].isFinite, "imageMean", "\(c.imageMean)", "finite")
            try check(c.imageStd[channel].isFinite && c.imageStd[channel] != 0, "imageStd", "\(c.imageStd)", "finite and non-zero")
        }
        self.configuration = c
        // Every (columns, rows) with minTiles <= columns x rows <= maxTiles, in llama.cpp's
        // discovery order, then by tile count. llama.cpp's std::sort is not stable, but grids
        // of equal tile count never tie for the closest aspect ratio (a grid with a ratio
        // between theirs is always closer), so the order among them cannot change a result.
        var grids: [TileGrid] = []
        for n in c.minTiles...c.maxTiles {
            for columns in 1...n {
                for rows in 1...n where (c.minTiles...c.maxTiles).contains(columns * rows) {
                    let grid = TileGrid(columns: columns, rows: rows)
                    if !grids.contains(grid) { grids.append(grid) }
                }
            }
        }
        self.grids = grids.enumerated().sorted { a, b in
            (a.element.columns * a.element.rows, a.offset) < (b.element.columns * b.element.rows, b.offset)
        }.map(\.element)
    }

    // MARK: Sizes

    /// The size a slice of a `width` x `height` image is resized to (transformers'
    /// `smart_resize`): each side rounded to a multiple of the alignment (half away from zero,
    /// at least one alignment); if the area is then over `maxPixels`, both sides scaled by
    /// sqrt(area / max) and floored to the alignment; if under `minPixels`, scaled up by
    /// sqrt(min / area) and ceiled. float32 arithmetic, as llama.cpp.
    public func smartResize(width: Int, height: Int) -> (width: Int, height: Int) {
        let align = configuration.alignment
        let alignF = Float(align)
        func roundToAlignment(_ x: Float) -> Int { Int((x / alignF).rounded(.toNearestOrAwayFromZero)) * align }
        func ceilToAlignment(_ x: Float) -> Int { Int((x / alignF).rounded(.up)) * align }
        func floorToAlignment(_ x: Float) -> Int { Int((x / alignF).rounded(.down)) * align }
        var w = max(align, roundToAlignment(Float(width)))
        var h = max(align, roundToAlignment(Float(height)))
        if w * h > configuration.maxPixels {
            let beta = (Float(height) * Float(width) / Float(configuration.maxPixels)).squareRoot()
            h = max(align, floorToAlignment(Float(height) / beta))
            w = max(align, floorToAlignment(Float(width) / beta))
        } else if w * h < configuration.minPixels {
            let beta = (Float(configuration.minPixels) / (Float(height) * Float(width))).squareRoot()
            h = ceilToAlignment(Float(height) * beta)
            w = ceilToAlignment(Float(width) * beta)
        }
        return (w, h)
    }

    /// Whether a `width` x `height` image is cut into tiles: its sides rounded to the
    /// alignment (half to even, at least one patch) give an area over `maxPixelsTolerance`
    /// times `maxPixels` (524,288 for LFM2-VL). Double arithmetic, as llama.cpp.
    public func isTiled(width: Int, height: Int) -> Bool {
        let align = configuration.alignment
        func roundToAlignment(_ side: Int) -> Int {
            let x = Double(Float(side)) / Double(align)
            return Int(x.rounded(.toNearestOrEven)) * align
        }
        let h = max(configuration.patchSize, roundToAlignment(height))
        let w = max(configuration.patchSize, roundToAlignment(width))
        return Double(h) * Double(w) > Double(configuration.maxPixels) * Double(configuration.maxPixelsTolerance)
    }

    /// The tile grid of a tiled image: among the candidate grids (by increasing tile count),
    /// the one whose columns/rows is closest to width/height; on an equal difference a later
    /// (larger) grid replaces the best when the image's area exceeds half the grid's pixels.
    public func tileGrid(width: Int, height: Int) -> TileGrid {
        let aspect = Float(width) / Float(height)
        let area = Float(width * height)
        var bestDifference = Float.greatestFiniteMagnitude
        var best = TileGrid(columns: 1, rows: 1)
        let tile = configuration.tileSize
        for grid in grids {
            let difference = abs(aspect - Float(grid.columns) / Float(grid.rows))
            if difference < bestDifference {
                bestDifference = difference
                best = grid
            } else if difference == bestDifference && area > 0.5 * Float(tile * tile * grid.columns * grid.rows) {
                best = grid
            }
        }
        return best
    }

    /// The slices a `width` x `height` image becomes, in prompt order, without their pixels:
    /// what the prompt needs to lay out the image's tokens.
    public func layout(width: Int, height: Int) throws(ImagePreprocessingError) -> ImageLayout {
        guard width > 0 && height > 0 else { throw .emptyImage(width: width, height: height) }
        let thumbnail = smartResize(width: width, height: height)
        let resizes = thumbnail.width != width || thumbnail.height != height
        if resizes && max(thumbnail.width, thumbnail.height) > PillowBilinear.maxSide {
            throw .resizeTargetOutOfRange(width: thumbnail.width, height: thumbnail.height, maxSide: PillowBilinear.maxSide)
        }
        guard isTiled(width: width, height: height) else {
            return ImageLayout(grid: nil, slices: [slice(.image, thumbnail.width, thumbnail.height)])
        }
        let grid = tileGrid(width: width, height: height)
        var slices: [ImageLayout.Slice] = []
        for row in 1...grid.rows {
            for column in 1...grid.columns {
                slices.append(slice(.tile(row: row, column: column), configuration.tileSize, configuration.tileSize))
            }
        }
        slices.append(slice(.thumbnail, thumbnail.width, thumbnail.height))
        return ImageLayout(grid: grid, slices: slices)
    }

    private func slice(_ kind: ImageSliceKind, _ width: Int, _ height: Int) -> ImageLayout.Slice {
        let patchesPerToken = configuration.mergeFactor * configuration.mergeFactor
        let patches = (width / configuration.patchSize) * (height / configuration.patchSize)
        return ImageLayout.Slice(kind: kind, width: width, height: height, tokenCount: patches / patchesPerToken)
    }

    // MARK: Pixels

    /// Preprocesses `image` into its slices, in prompt order, each normalized to floats.
    public func preprocess(_ image: RGBImage) throws(ImagePreprocessingError) -> PreprocessedImage {
        let plan = try layout(width: image.width, height: image.height)
        var slices: [ImageSlice] = []
        if let grid = plan.grid {
            let tile = configuration.tileSize
            let canvas = fitAndPad(image, width: tile * grid.columns, height: tile * grid.rows)
            for sliceIndex in 0..<(plan.slices.count - 1) {
                let row = sliceIndex / grid.columns
                let column = sliceIndex % grid.columns
                let pixels = crop(canvas, x: column * tile, y: row * tile, width: tile, height: tile)
                slices.append(normalized(pixels, as: plan.slices[sliceIndex]))
            }
        }
        let last = plan.slices[plan.slices.count - 1]
        slices.append(normalized(resized(image, width: last.width, height: last.height), as: last))
        return PreprocessedImage(grid: plan.grid, slices: slices)
    }

    private func resized(_ image: RGBImage, width: Int, height: Int) -> RGBImage {
        width == image.width && height == image.height ? image : PillowBilinear.resize(image, width: width, height: height)
    }

    /// `image` scaled to fit `width` x `height` keeping its aspect ratio (the smaller of the
    /// two scales; each side ceiled, capped at the target) and centred on black, the slack
    /// split with the odd pixel after (llama.cpp's PAD_CEIL). An image of exactly the target
    /// size is used as it is.
    func fitAndPad(_ image: RGBImage, width: Int, height: Int) -> RGBImage {
        if image.width == width && image.height == height { return image }
        let scale = min(Float(width) / Float(image.width), Float(height) / Float(image.height))
        let contentWidth = min(Int((Float(image.width) * scale).rounded(.up)), width)
        let contentHeight = min(Int((Float(image.height) * scale).rounded(.up)), height)
        let content = resized(image, width: contentWidth, height: contentHeight)
        let left = (width - contentWidth) / 2
        let top = (height - contentHeight) / 2
        var rgb = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<contentHeight {
            let source = y * contentWidth * 3
            let destination = ((top + y) * width + left) * 3
            rgb.replaceSubrange(destination..<(destination + contentWidth * 3), with: content.rgb[source..<(source + contentWidth * 3)])
        }
        return RGBImage(width: width, height: height, rgb: rgb)
    }

    private func crop(_ image: RGBImage, x: Int, y: Int, width: Int, height: Int) -> RGBImage {
        var rgb: [UInt8] = []
        rgb.reserveCapacity(width * height * 3)
        for row in y..<(y + height) {
            let start = (row * image.width + x) * 3
            rgb.append(contentsOf: image.rgb[start..<(start + width * 3)])
        }
        return RGBImage(width: width, height: height, rgb: rgb)
    }

    /// The slice's pixels with the configuration's normalization (`ImageSlice.values`).
    private func normalized(_ image: RGBImage, as slice: ImageLayout.Slice) -> ImageSlice {
        ImageSlice(
            kind: slice.kind, width: slice.width, height: slice.height, tokenCount: slice.tokenCount, pixels: image.rgb,
            mean: configuration.imageMean, std: configuration.imageStd)
    }
}

/// Columns and rows of a tiled image's grid.
public struct TileGrid: Sendable, Equatable, Hashable {
    /// Tiles across.
    public let columns: Int
    /// Tiles down.
    public let rows: Int

    /// A grid of `columns` x `rows` tiles.
    public init(columns: Int, rows: Int) {
        self.columns = columns
        self.rows = rows
    }
}

/// What a slice is, for the prompt's markers.
public enum ImageSliceKind: Sendable, Equatable, Hashable {
    /// The whole image, untiled (no markers around it but the image's start and end).
    case image
    /// The tile at `row`, `column` of the grid, both counted from 1 (`<|img_row_R_col_C|>`).
    case tile(row: Int, column: Int)
    /// The whole image, smart-resized, after the tiles (`<|img_thumbnail|>`).
    case thumbnail
}

/// The slices an image becomes, without pixels.
public struct ImageLayout: Sendable, Equatable {
    /// One slice's place and size, without pixels.
    public struct Slice: Sendable, Equatable {
        /// Whole image, tile or thumbnail.
        public let kind: ImageSliceKind
        /// Width in pixels, a multiple of the patch size.
        public let width: Int
        /// Height in pixels, a multiple of the patch size.
        public let height: Int
        /// Tokens the slice takes in the language model: (width / patch) x (height / patch)
        /// patches, merged by mergeFactor^2.
        public let tokenCount: Int
    }

    /// The tile grid, or nil for an untiled image.
    public let grid: TileGrid?
    /// In prompt order: one `.image`, or the tiles row by row then the `.thumbnail`.
    public let slices: [Slice]

    /// Tokens of all slices together.
    public var tokenCount: Int { slices.reduce(0) { $0 + $1.tokenCount } }
}

/// One preprocessed slice: `width` x `height` pixels, normalized to floats when they are read
/// (`values`). The bytes are kept rather than the floats, a quarter of the memory, for as
/// long as the slice waits for the encoder (a queued request holds its images' slices).
public struct ImageSlice: Sendable, Equatable {
    /// Whole image, tile or thumbnail.
    public let kind: ImageSliceKind
    /// Width in pixels, a multiple of the patch size.
    public let width: Int
    /// Height in pixels, a multiple of the patch size.
    public let height: Int
    /// Tokens the slice takes in the language model.
    public let tokenCount: Int
    /// `width * height * 3` bytes, row-major, channels interleaved (R, G, B, R, ...): the
    /// resized or cropped pixels.
    public let pixels: [UInt8]
    /// The normalization's per-channel mean and standard deviation.
    let mean: SIMD3<Float>
    let std: SIMD3<Float>

    /// `width * height * 3` values, row-major, channels interleaved (R, G, B, R, ...):
    /// (byte / 255 - mean) / std per channel, in float32 as llama.cpp computes it.
    public var values: [Float] {
        var values = [Float](repeating: 0, count: pixels.count)
        pixels.withUnsafeBufferPointer { bytes in
            values.withUnsafeMutableBufferPointer { out in
                var i = 0
                while i < bytes.count {
                    for channel in 0..<3 { out[i + channel] = (Float(bytes[i + channel]) / 255 - mean[channel]) / std[channel] }
                    i += 3
                }
            }
        }
        return values
    }
}

/// An image ready for the vision encoder.
public struct PreprocessedImage: Sendable, Equatable {
    /// The tile grid, or nil for an untiled image.
    public let grid: TileGrid?
    /// In prompt order: one `.image`, or the tiles row by row then the `.thumbnail`.
    public let slices: [ImageSlice]
}

/// Why an image cannot be preprocessed.
public enum ImagePreprocessingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A configuration value out of its sensible range.
    case invalidConfiguration(field: String, value: String, rule: String)
    /// The image has no pixels.
    case emptyImage(width: Int, height: Int)
    /// The image's shape asks for a resize beyond llama.cpp's 65536-pixel side (an extremely
    /// thin image); llama.cpp refuses it too.
    case resizeTargetOutOfRange(width: Int, height: Int, maxSide: Int)

    public var description: String {
        switch self {
        case .invalidConfiguration(let field, let value, let rule):
            return "invalid image preprocessing configuration: \(field) is \(value), must be \(rule)"
        case .emptyImage(let width, let height):
            return "cannot preprocess an empty image (\(width)x\(height))"
        case .resizeTargetOutOfRange(let width, let height, let maxSide):
            return
                "the image would be resized to \(width)x\(height), over the \(maxSide)-pixel side limit (its aspect ratio is too extreme)"
        }
    }
}
