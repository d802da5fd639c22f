import HTTPTypes
import Hummingbird
import NIOCore
import StrataConfiguration

/// The small HTML pages of the IIIF access and token services: a click-through's terms, the
/// page that closes the access window, the token service's `postMessage` and plain notices.
/// Every text from the configuration or the request is escaped (``ViewerPage/htmlEscaped(_:)``,
/// ``ViewerPage/scriptString(_:)``); every page is `no-store`. Cost: a few concatenations.
package enum IIIFAuthPages {
    /// A notice page.
    package static func page(status: HTTPResponse.Status, title: String, text: String) -> Response {
        html(status: status, title: title, body: "<h1>\(ViewerPage.htmlEscaped(title))</h1>\n<p>\(ViewerPage.htmlEscaped(text))</p>\n")
    }

    /// An active service without a login page: its label and a button that `POST`s to `action`.
    package static func clickThrough(_ service: IIIFAuthSettings.Service, action: String) -> Response {
        html(
            status: .ok, title: service.label,
            body: """
                <h1>\(ViewerPage.htmlEscaped(service.label))</h1>
                <p>This image is restricted. Accept to see it in full; the access lasts for this browser session's cookie.</p>
                <form method="post" action="\(ViewerPage.htmlEscaped(action))"><button id="accept" type="submit">Accept</button></form>

                """)
    }

    /// After a grant: the cookie is set (by the caller); the window closes itself.
    package static func closing(_ service: IIIFAuthSettings.Service) -> Response {
        html(
            status: .ok, title: service.label,
            body: "<p>Access granted. This window closes itself; if it does not, close it.</p>\n<script>window.close();</script>\n")
    }

    /// The token service's answer: a page that posts one message (`strings`, and `number` when
    /// given) to the viewer at `origin` (the window that loaded it in an iframe).
    package static func postMessage(_ strings: [(String, String)], number: (String, Int)? = nil, to origin: String) -> Response {
        var fields = strings.map { "\(ViewerPage.scriptString($0.0)): \(ViewerPage.scriptString($0.1))" }
        if let number { fields.append("\(ViewerPage.scriptString(number.0)): \(number.1)") }
        let script = "window.parent.postMessage({\(fields.joined(separator: ", "))}, \(ViewerPage.scriptString(origin)));"
        return html(status: .ok, title: "token", body: "<script>\(script)</script>\n")
    }

    private static func html(status: HTTPResponse.Status, title: String, body: String) -> Response {
        let page = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>\(ViewerPage.htmlEscaped(title))</title></head>
            <body>
            \(body)</body></html>

            """
        return Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: page)))
    }
}
