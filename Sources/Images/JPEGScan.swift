/// Decoding the entropy-coded data of a scan into planes (sequential) or coefficients
/// (progressive), the progressive images' final inverse DCT, and the color conversion.
extension JPEGParser {
    /// Decodes one scan starting at `scan.dataOffset`. Returns where reading stopped and the
    /// marker that stopped it, if it met one.
    func decodeScan(_ scan: Scan, frame: Frame, components: [JPEGComponent], buffers: JPEGBuffers) throws(ImageError) -> (
        position: Int, marker: UInt8?
    ) {
        var decoder = JPEGBlockDecoder(reader: JPEGBitReader(bytes: bytes, position: scan.dataOffset))
        // A scan of one component is not interleaved: its MCU is one block, and it covers only
        // the blocks holding image content. Otherwise MCUs hold h x v blocks of each component.
        let interleaved = scan.componentIndices.count > 1
        let first = components[scan.componentIndices[0]]
        let mcusWide = interleaved ? frame.mcusWide : (first.sampleWidth + 7) / 8
        let mcusHigh = interleaved ? frame.mcusHigh : (first.sampleHeight + 7) / 8
        let mcuCount = mcusWide * mcusHigh
        var untilRestart = restartInterval > 0 ? restartInterval : Int.max
        let scratch = UnsafeMutablePointer<Int16>.allocate(capacity: 64 + 72)
        defer { scratch.deallocate() }
        scratch.initialize(repeating: 0, count: 64 + 72)
        var mcu = 0
        for mcuY in 0..<mcusHigh {
            for mcuX in 0..<mcusWide {
                for index in scan.componentIndices {
                    let component = components[index]
                    let blocksAcross = interleaved ? component.horizontalSampling : 1
                    let blocksDown = interleaved ? component.verticalSampling : 1
                    for by in 0..<blocksDown {
                        for bx in 0..<blocksAcross {
                            let blockX = mcuX * blocksAcross + bx
                            let blockY = mcuY * blocksDown + by
                            do {
                                try decodeBlock(
                                    &decoder, scan: scan, component: component, index: index, blockX: blockX, blockY: blockY,
                                    buffers: buffers, scratch: scratch)
                            } catch {
                                let what =
                                    switch error {
                                    case .invalidCode(let what): "invalid Huffman \(what)"
                                    case .overflow(let what): what
                                    }
                                throw corrupt(
                                    decoder.reader.position,
                                    "\(what) in component \(component.id), block (\(blockX), \(blockY)) of the scan")
                            }
                        }
                    }
                }
                mcu += 1
                untilRestart -= 1
                if untilRestart == 0 && mcu < mcuCount {
                    decoder.reader.fill()
                    guard let marker = decoder.reader.marker, (0xD0...0xD7).contains(marker) else {
                        throw corrupt(decoder.reader.position, "expected a restart marker after MCU \(mcu) of \(mcuCount)")
                    }
                    decoder.restart()
                    untilRestart = restartInterval
                }
            }
        }
        return (decoder.reader.position, decoder.reader.marker)
    }

    private func decodeBlock(
        _ decoder: inout JPEGBlockDecoder, scan: Scan, component: JPEGComponent, index: Int, blockX: Int, blockY: Int,
        buffers: JPEGBuffers, scratch: UnsafeMutablePointer<Int16>
    ) throws(JPEGBlockError) {
        let blockIndex = blockY * component.blocksWide + blockX
        guard let coefficients = buffers.coefficients[index].baseAddress, !buffers.coefficients[index].isEmpty else {
            // Sequential: decode, dequantize and transform straight into the plane.
            try decoder.decodeBaseline(
                into: scratch, dc: dcTables[component.dcTable]!, ac: acTables[component.acTable]!,
                quantization: quantization[component.quantizationTable], component: index)
            let stride = component.blocksWide * 8
            let destination = buffers.planes[index].baseAddress! + blockY * 8 * stride + blockX * 8
            JPEGIDCT.transform(scratch, into: destination, stride: stride, workspace: scratch + 64)
            return
        }
        let block = coefficients + blockIndex * 64
        switch (scan.spectralStart == 0, scan.successiveHigh == 0) {
        case (true, true):
            try decoder.decodeFirstDC(into: block, table: dcTables[component.dcTable]!, component: index, successiveLow: scan.successiveLow)
        case (true, false):
            decoder.refineDC(into: block, successiveLow: scan.successiveLow)
        case (false, true):
            try decoder.decodeFirstAC(
                into: block, table: acTables[component.acTable]!, start: scan.spectralStart, end: scan.spectralEnd,
                successiveLow: scan.successiveLow)
        case (false, false):
            try decoder.refineAC(
                into: block, table: acTables[component.acTable]!, start: scan.spectralStart, end: scan.spectralEnd,
                successiveLow: scan.successiveLow)
        }
    }

    /// After the last scan of a progressive image: dequantize each block holding image content
    /// (16-bit products, as stb_image stores them) and transform it into the plane.
    func finishProgressive(components: [JPEGComponent], buffers: JPEGBuffers) {
        let workspace = UnsafeMutablePointer<Int16>.allocate(capacity: 72)
        defer { workspace.deallocate() }
        workspace.initialize(repeating: 0, count: 72)
        for (index, component) in components.enumerated() {
            let table = quantization[component.quantizationTable]
            let stride = component.blocksWide * 8
            let coefficients = buffers.coefficients[index].baseAddress!
            let plane = buffers.planes[index].baseAddress!
            for blockY in 0..<((component.sampleHeight + 7) / 8) {
                for blockX in 0..<((component.sampleWidth + 7) / 8) {
                    let block = coefficients + (blockY * component.blocksWide + blockX) * 64
                    for i in 0..<64 { block[i] = Int16(truncatingIfNeeded: Int(block[i]) * table[i]) }
                    JPEGIDCT.transform(block, into: plane + blockY * 8 * stride + blockX * 8, stride: stride, workspace: workspace)
                }
            }
        }
    }

    /// The color model stb_image picks: RGB when the component ids spell 'R', 'G', 'B' or an
    /// Adobe segment says transform 0 without a JFIF segment; for 4 components, Adobe's
    /// transform 0 (CMYK) or 2 (YCCK).
    func colorModel(_ components: [JPEGComponent]) -> JPEGColorModel {
        switch components.count {
        case 1: return .gray
        case 3:
            let namedRGB = components.map(\.id) == Array("RGB".utf8)
            return namedRGB || (adobeTransform == 0 && !sawJFIF) ? .rgb : .yCbCr
        default:
            switch adobeTransform {
            case 0?: return .cmyk
            case 2?: return .yccK
            default: return .yCbCrIgnoringFourth
            }
        }
    }

    func assembleRGB(frame: Frame, components: [JPEGComponent], buffers: JPEGBuffers) -> [UInt8] {
        let planes = components.enumerated().map { index, component in
            JPEGPlane(
                samples: buffers.planes[index], stride: component.blocksWide * 8, width: component.sampleWidth,
                height: component.sampleHeight, horizontalFactor: frame.maxHorizontal / component.horizontalSampling,
                verticalFactor: frame.maxVertical / component.verticalSampling)
        }
        return JPEGColorConverter.rgb(planes: planes, width: frame.width, height: frame.height, model: colorModel(components))
    }
}
