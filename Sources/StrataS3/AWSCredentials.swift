/// An AWS access key pair, with the session token of temporary (STS) credentials when there is one.
///
/// Use it to build a ``SigV4Signer``; read it from the process environment with ``fromEnvironment(_:)``.
/// A plain value: copying costs three string references. Its `description`, `debugDescription` and
/// mirror (what `print`, string interpolation, `dump` and debuggers show) name the access key ID only:
/// the secret and the session token always read `<redacted>`, so logging a value never leaks them.
public struct AWSCredentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The access key ID (`AKIA…` or `ASIA…`): public, it names the key.
    public var accessKeyID: String
    /// The secret access key: signs requests, never printed.
    public var secretAccessKey: String
    /// The session token of temporary credentials, sent as `x-amz-security-token`; never printed.
    public var sessionToken: String?

    /// Credentials from their parts; an empty `sessionToken` is kept as given.
    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// Credentials from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` in `environment`
    /// (for instance `ProcessInfo.processInfo.environment`); nil when the key ID or the secret is missing or
    /// empty. An empty session token counts as none.
    public static func fromEnvironment(_ environment: [String: String]) -> AWSCredentials? {
        guard let accessKeyID = environment["AWS_ACCESS_KEY_ID"], !accessKeyID.isEmpty,
            let secretAccessKey = environment["AWS_SECRET_ACCESS_KEY"], !secretAccessKey.isEmpty
        else {
            return nil
        }
        var sessionToken = environment["AWS_SESSION_TOKEN"]
        if sessionToken?.isEmpty == true {
            sessionToken = nil
        }
        return AWSCredentials(accessKeyID: accessKeyID, secretAccessKey: secretAccessKey, sessionToken: sessionToken)
    }

    private static let redacted = "<redacted>"

    private var redactedSessionToken: String {
        sessionToken == nil ? "nil" : Self.redacted
    }

    public var description: String {
        "AWSCredentials(accessKeyID: \(accessKeyID), secretAccessKey: \(Self.redacted), "
            + "sessionToken: \(redactedSessionToken))"
    }

    public var debugDescription: String {
        description
    }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "accessKeyID": accessKeyID,
                "secretAccessKey": Self.redacted,
                "sessionToken": redactedSessionToken,
            ],
            displayStyle: .struct
        )
    }
}

extension AWSCredentials {
    /// Throws, naming `<settings>.accessKeyID`, when the key id or the secret is empty.
    public func validate(settings: String) throws(S3ConfigurationError) {
        if accessKeyID.isEmpty || secretAccessKey.isEmpty {
            throw S3ConfigurationError(
                key: "\(settings).accessKeyID", value: "",
                allowed: "an access key id and a secret key (\(settings).accessKeyID and \(settings).secretAccessKey, "
                    + "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
        }
    }
}
