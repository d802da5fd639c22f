import Foundation
import Strata

/// thumbor's `meta/` answer: the JSON document that describes the original and what would be
/// done to it (`{"thumbor": {"source": …, "operations": […], "target": …}}`), the operations
/// in thumbor's words (`crop`, `resize`, `flip_horizontally`, `flip_vertically`, `rotate`).
/// Cost: the original's size (memoized) and a few small strings.
package enum ThumborMeta {
    package static func json(_ parsed: ThumborEndpoint.Parsed, plan: ThumborPlan, original: IIIFOriginals.Original) -> [UInt8] {
        var operations: [[String: Any]] = []
        var source = original.size
        if parsed.url.trim != nil { operations.append(["type": "trim"]) }
        if let crop = plan.request.key.operations.crop {
            let (left, top) = (Int(crop.x), Int(crop.y))
            let (right, bottom) = (left + Int(crop.width), top + Int(crop.height))
            operations.append(["type": "crop", "left": left, "top": top, "right": right, "bottom": bottom])
            source = PixelSize(width: right - left, height: bottom - top)
        }
        if plan.request.mode == .fill {
            let focus = plan.request.key.gravity.focus ?? .center
            let sizing = SizingPlan(source: source, box: plan.resized, mode: .fill, allowUpscale: true, focus: focus)
            let rect = sizing.sourceRect
            if Int(rect.width.rounded()) != source.width || Int(rect.height.rounded()) != source.height {
                let (left, top) = (Int(rect.x.rounded()), Int(rect.y.rounded()))
                operations.append([
                    "type": "crop", "left": left, "top": top, "right": left + Int(rect.width.rounded()),
                    "bottom": top + Int(rect.height.rounded()),
                ])
            }
        }
        operations.append(["type": "resize", "width": plan.resized.width, "height": plan.resized.height])
        for step in plan.steps {
            switch step {
            case .flipHorizontally: operations.append(["type": "flip_horizontally"])
            case .flipVertically: operations.append(["type": "flip_vertically"])
            case .stretch(let size): operations.append(["type": "resize", "width": size.width, "height": size.height])
            case .filter(.rotate(let degrees)): operations.append(["type": "rotate", "angle": degrees])
            case .filter: break
            }
        }
        let target = plan.finalSize(from: plan.resized)
        let document: [String: Any] = [
            "thumbor": [
                "source": [
                    "url": parsed.key, "width": original.size.width, "height": original.size.height, "frameCount": 1,
                ] as [String: Any],
                "operations": operations,
                "target": ["width": target.width, "height": target.height],
            ] as [String: Any]
        ]
        let data = (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys])) ?? Data("{}".utf8)
        return [UInt8](data)
    }
}
